// The one way to build the nftables dataplane for this node: the daemon and `kproxy cleanup` call
// it, and nothing outside this folder needs to know its parts.
import type { DataplaneLog, LiveDataplane } from '../../contract/dataplane.ts';
import { type CommandRunner, execaRunner } from '../shared/command-runner.ts';
import { NetlinkElementWriter } from '../shared/nft/netlink-elements.ts';
import { TABLE } from '../shared/nft/transaction.ts';
import { familySets } from './base-objects.ts';
import { NftablesDataplane } from './live.ts';
import { commandNftRunner } from './nft-runner.ts';

export interface NftablesBuildOptions {
  /** How nft and conntrack are run; the real tools in this process' namespace by default. */
  readonly runner?: CommandRunner;
  readonly log: DataplaneLog;
}

export function buildNftablesDataplane({ runner, log }: NftablesBuildOptions): LiveDataplane {
  const commands = runner ?? execaRunner();
  return new NftablesDataplane({
    nft: commandNftRunner(commands),
    commands,
    // Elements by netlink only where nft runs: the socket lives in this process' namespace.
    elements: runner === undefined ? NetlinkElementWriter.open(TABLE, familySets) : undefined,
    log,
  });
}
