// The two `conntrack` calls kproxy makes: list one family's UDP flows, and delete the entries one
// filter matches. Each runs under the runner's timeout (command-runner.ts).
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import type { CommandRunner } from '../command-runner.ts';
import { listUdpFlowsArgs } from './udp-flow-listing.ts';

/** `conntrack` failed; `stderr` says why (no nf_conntrack, no permission, a bad filter). */
export class ConntrackError extends DataplaneError {
  constructor(args: readonly string[], stderr: string) {
    super(`conntrack ${args.join(' ')} failed: ${stderr.trim()}`);
    this.name = 'ConntrackError';
  }
}

/** The listing parseUdpFlows (udp-flow-listing.ts) reads. */
export async function listUdpFlows(runner: CommandRunner, family: IPFamily): Promise<string> {
  const args = listUdpFlowsArgs(family);
  const result = await runner.run('conntrack', args);
  if (result.exitCode !== 0) throw new ConntrackError(args, result.stderr);
  return result.stdout;
}

/** Runs `conntrack -D <filter>`; returns how many entries the kernel deleted. */
export async function deleteConntrackEntries(
  runner: CommandRunner,
  filter: readonly string[],
): Promise<number> {
  const args = ['-D', ...filter];
  const result = await runner.run('conntrack', args);
  // It exits 1 when nothing matched (a flow that ended meanwhile); the summary line says how many
  // went either way, and only its absence is a failure.
  const deleted = /(\d+) flow entries have been deleted/.exec(result.stderr)?.[1];
  if (deleted === undefined) throw new ConntrackError(args, result.stderr);
  return Number(deleted);
}
