// The one way to build the nftables dataplane for this node: the daemon and `kproxy cleanup` call
// it, and nothing outside this folder needs to know its parts.
import type { DataplaneLog, LiveDataplane } from '../../contract/dataplane.ts';
import { type CommandRunner, execaRunner } from '../shared/command-runner.ts';
import type { DriftReader } from '../shared/drift/drift-report.ts';
import { NetlinkElementWriter } from '../shared/nft/netlink-elements.ts';
import { TABLE } from '../shared/nft/transaction.ts';
import { familySets } from './base-objects.ts';
import { nftablesDriftReader } from './drift.ts';
import { NftablesDataplane } from './live.ts';
import { commandNftRunner } from './nft-runner.ts';
import { schedulerChoice } from './scheduler.ts';

export interface NftablesBuildOptions {
  /** How nft and conntrack are run; the real tools in this process' namespace by default. */
  readonly runner?: CommandRunner;
  readonly log: DataplaneLog;
  /** kube-proxy's ipvs.scheduler: its nftables counterpart (scheduler.ts); absent or rr: at random. */
  readonly scheduler?: string;
  /** Where a scheduler without a counterpart is said, once at start; `log` when absent. */
  readonly warn?: DataplaneLog;
}

export function buildNftablesDataplane({
  runner,
  log,
  scheduler,
  warn,
}: NftablesBuildOptions): LiveDataplane {
  const commands = runner ?? execaRunner();
  const choice = schedulerChoice(scheduler);
  if (choice.warning) (warn ?? log)(`nftables: ${choice.warning}`);
  return new NftablesDataplane({
    nft: commandNftRunner(commands),
    commands,
    // Elements by netlink only where nft runs: the socket lives in this process' namespace.
    elements: runner === undefined ? NetlinkElementWriter.open(TABLE, familySets) : undefined,
    log,
    endpointHash: choice.endpointHash,
  });
}

/** What `kproxy diff` and the daemon's integrity checks compare (drift.ts), with the same options. */
export function buildNftablesDriftReader({
  runner,
  scheduler,
}: Pick<NftablesBuildOptions, 'runner' | 'scheduler'>): DriftReader {
  return nftablesDriftReader(runner ?? execaRunner(), scheduler);
}
