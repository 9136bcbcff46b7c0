// The kproxy command line: one table of subcommands. bin/kproxy.ts and `npm run kproxy` call main().
import { readFileSync } from 'node:fs';
import { cleanupCommand } from './cleanup.ts';
import { MAIN_USAGE } from './help.ts';
import { installCommand } from './install.ts';
import { type CliIO, processIO } from './io.ts';
import { renderCommand } from './render.ts';
import { runCommand } from './run.ts';
import { traceCommand } from './trace.ts';

type Command = (args: readonly string[], io: CliIO) => Promise<number>;

const COMMANDS: Readonly<Record<string, Command>> = {
  render: renderCommand,
  trace: (args, io) => traceCommand(args, io),
  run: (args, io) => runCommand(args, io),
  cleanup: (args, io) => cleanupCommand(args, io),
  install: installCommand,
  help: helpCommand,
  '--help': helpCommand,
  '-h': helpCommand,
  version: versionCommand,
  '--version': versionCommand,
};

/** Runs one command and returns the exit code: 0 ok, 1 user error, 2 usage error. */
export async function main(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    io.stderr.write(MAIN_USAGE);
    return 2;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.stderr.write(`kproxy: unknown command ${JSON.stringify(name)} (see kproxy help)\n`);
    return 2;
  }
  return command(args, io);
}

async function helpCommand(_args: readonly string[], io: CliIO): Promise<number> {
  io.stdout.write(MAIN_USAGE);
  return 0;
}

async function versionCommand(_args: readonly string[], io: CliIO): Promise<number> {
  const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  io.stdout.write(`kproxy ${packageJson.version}\n`);
  return 0;
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
