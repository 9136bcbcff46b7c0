// How every subcommand starts: its flags parsed, --help answered, and a usage error printed with
// the pointer to --help and exit code 2, so all of them read and fail alike.
import type { ParseArgsOptionsConfig } from 'node:util';
import type { FlagValues } from '../config/proxy-flags.ts';
import type { CliIO } from './io.ts';
import { parseFlags } from './parse-flags.ts';

/** Prints a usage error of `kproxy COMMAND`; returns its exit code, 2. */
export function usageError(io: CliIO, command: string, message: string): number {
  io.stderr.write(`kproxy ${command}: ${message}\n(see kproxy ${command} --help)\n`);
  return 2;
}

/** The flags of `kproxy COMMAND`, or the exit code once --help or a usage error has been printed. */
export function commandFlags(
  io: CliIO,
  command: string,
  args: readonly string[],
  options: ParseArgsOptionsConfig,
  usage: string,
): FlagValues | number {
  const flags = parseFlags(args, options);
  if (!flags.ok) return usageError(io, command, flags.error);
  if (flags.values.help) {
    io.stdout.write(usage);
    return 0;
  }
  return flags.values;
}
