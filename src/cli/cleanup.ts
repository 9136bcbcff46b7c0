// `kproxy cleanup [--mode M] [--kube-proxy]`: removes the rules kproxy owns (every mode this build
// can program, or only M), and with --kube-proxy also what an upstream kube-proxy left behind.
// Nothing else is touched. Run it after stopping the daemon: the daemon leaves its rules on stop.
import type { ParseArgsOptionsConfig } from 'node:util';
import { pino } from 'pino';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import type { DataplaneMode } from '../../dataplanes/shared/dataplane.ts';
import { removeKubeProxyLeftovers } from '../../dataplanes/shared/kube-proxy-leftovers.ts';
import { createLiveDataplane, LIVE_MODES } from '../daemon/live-dataplanes.ts';
import type { CliIO } from './io.ts';
import { parseFlags } from './parse-flags.ts';

const CLEANUP_OPTIONS: ParseArgsOptionsConfig = {
  mode: { type: 'string' },
  'kube-proxy': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export const CLEANUP_USAGE = `Usage: kproxy cleanup [--mode MODE] [--kube-proxy]

Removes every rule kproxy owns (nft tables "kproxy", iptables KPROXY-* chains), for MODE only
when given (${LIVE_MODES.join(', ')}). With --kube-proxy, also removes upstream kube-proxy's
nft "kube-proxy" tables and KUBE-* chains (not kubelet's). Stop the daemon first.
`;

export async function cleanupCommand(
  args: readonly string[],
  io: CliIO,
  runner: CommandRunner = execaRunner(),
): Promise<number> {
  const flags = parseFlags(args, CLEANUP_OPTIONS);
  const usage = (message: string) => {
    io.stderr.write(`kproxy cleanup: ${message}\n(see kproxy cleanup --help)\n`);
    return 2;
  };
  if (!flags.ok) return usage(flags.error);
  if (flags.values.help) {
    io.stdout.write(CLEANUP_USAGE);
    return 0;
  }
  const mode = flags.values.mode as string | undefined;
  if (mode !== undefined && !LIVE_MODES.includes(mode as DataplaneMode)) {
    return usage(`--mode: ${JSON.stringify(mode)} is not one of ${LIVE_MODES.join(', ')}`);
  }
  const logger = pino({ level: 'warn' }, { write: (line: string) => io.stderr.write(line) });
  try {
    for (const each of mode ? [mode as DataplaneMode] : LIVE_MODES) {
      const dataplane = await createLiveDataplane(each, { logger, runner });
      await dataplane.cleanup();
      io.stdout.write(`removed kproxy's ${each} rules\n`);
    }
    if (flags.values['kube-proxy']) {
      const removed = await removeKubeProxyLeftovers(runner);
      for (const what of removed) io.stdout.write(`removed ${what}\n`);
      if (removed.length === 0) io.stdout.write('no kube-proxy leftovers found\n');
    }
  } catch (error) {
    io.stderr.write(`kproxy cleanup: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  return 0;
}
