// The one way to build the iptables dataplane for this node: the daemon and `kproxy cleanup` call
// it, and nothing outside this folder needs to know its parts.
import type { DataplaneLog, LiveDataplane } from '../../contract/dataplane.ts';
import { type CommandRunner, execaRunner } from '../shared/command-runner.ts';
import type { DriftReader } from '../shared/drift/drift-report.ts';
import { iptablesDriftReader } from './drift.ts';
import { IptablesDataplane } from './live.ts';

export interface IptablesBuildOptions {
  /** How iptables-restore and friends are run; the real tools in this process' namespace by default. */
  readonly runner?: CommandRunner;
  readonly log: DataplaneLog;
}

export function buildIptablesDataplane({ runner, log }: IptablesBuildOptions): LiveDataplane {
  return new IptablesDataplane({ runner: runner ?? execaRunner(), log });
}

/** What `kproxy diff` and the daemon's integrity checks compare (drift.ts). */
export function buildIptablesDriftReader({ runner }: Pick<IptablesBuildOptions, 'runner'>): DriftReader {
  return iptablesDriftReader(runner ?? execaRunner());
}
