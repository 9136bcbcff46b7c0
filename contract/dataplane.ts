// The seam between sync and the dataplanes. Planning is pure: the same states give byte-identical
// output, which is what dry-run prints and what golden files hold. Only a live dataplane's apply
// touches the kernel.

import type { IPFamily } from './base/ip-family.ts';
import type { DualStackState, ServicePortKey } from './proxy-state.ts';
import type { ToolInput } from './tool-inputs.ts';

/** The stale UDP flow reconcile after a sync, for one family. */
export interface ConntrackReconciled {
  readonly family: IPFamily;
  /** Entries the kernel deleted. */
  readonly deleted: number;
  readonly durationMs: number;
  /** Listing lines that could not be read (skipped). */
  readonly unparsed: number;
}

/** How a live dataplane reports what it did (the daemon passes a logger's info). */
export type DataplaneLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

export type DataplaneMode = 'nftables' | 'iptables' | 'ipvs';

export interface DataplanePlanner<Plan> {
  readonly mode: DataplaneMode;
  /** Everything the dataplane owns, for the given state, replacing whatever was there. */
  planFull(state: DualStackState): Plan;
  /** Only what takes a kernel holding planFull(prev) to the ruleset of planFull(next). */
  planIncremental(prev: DualStackState, next: DualStackState): Plan;
  /**
   * What `kproxy run` applies for the plan, step by step (on an empty node for a full plan): each
   * tool's exact input (nft -f, iptables-restore, ...) and the objects made before it (nfacct).
   */
  inputs(plan: Plan): readonly ToolInput[];
  /** printInputs(inputs(plan)): what `render` prints. */
  render(plan: Plan): string;
  /**
   * Where the live dataplane sends a large plan as several inputs (iptables-nft; an nftables cold
   * start): those inputs, in order, each under a comment line naming it. Absent when every plan
   * is sent as `inputs` gives it.
   */
  chunkInputs?(plan: Plan): readonly ToolInput[];
  /** printInputs(chunkInputs(plan)): what `render --chunks` prints. */
  renderChunks?(plan: Plan): string;
}

export type SyncKind = 'full' | 'incremental';

export interface IptablesRuleCount {
  readonly family: IPFamily;
  readonly table: string;
  readonly rules: number;
}

export interface SyncOutcome {
  /** What actually ran: an incremental sync that fell back is reported as 'full'. */
  readonly kind: SyncKind;
  /** Rules/elements/entries the dataplane owns after the sync (for the rule-count metrics). */
  readonly objectCount: number;
  /** iptables mode: its rules per family and table (kubeproxy_sync_proxy_rules_iptables_total). */
  readonly iptablesRules?: readonly IptablesRuleCount[];
  /** The stale UDP flow reconcile after the sync, per family it ran for (none when it did not run). */
  readonly conntrack: readonly ConntrackReconciled[];
}

/** A dataplane that programs a kernel. Each instance owns one network namespace's rules. */
export interface LiveDataplane {
  readonly mode: DataplaneMode;
  /** Adopt what an earlier run left (read back once), so a restart does not flush live rules. */
  start(): Promise<void>;
  /**
   * Bring the kernel to `state`. Incremental syncs fall back to full on drift or a DataplaneError
   * (the kernel refused); anything else thrown is a bug and fails the sync.
   * `changed`, when given with an incremental sync, is exactly the service ports that differ from
   * the state of the previous sync (the model knows it without comparing); a dataplane may use it
   * instead of comparing states itself, or ignore it.
   */
  sync(state: DualStackState, kind: SyncKind, changed?: ReadonlySet<ServicePortKey>): Promise<SyncOutcome>;
  /** Cheap check that the rules are still ours and intact (canary, generation); false → full sync. */
  intact(): Promise<boolean>;
  /**
   * Resolves once the work the last sync left to do after it returned is done (the nftables
   * dataplane's fragment indexes); absent when a dataplane leaves none.
   */
  settled?(): Promise<void>;
  /**
   * Remove everything this dataplane owns, and nothing else, touching only what exists (no table
   * or link is created to be deleted). Returns what it removed, one line each for the operator;
   * empty when nothing of it was there.
   */
  cleanup(): Promise<readonly string[]>;
  /**
   * What cleanup() would remove now, as commands of the node's own tools, changing nothing: what
   * cleanup() itself runs (IPVS's virtual servers aside, which it removes over netlink), and what
   * `kproxy cleanup --script` writes for a purge of the package, which runs after kproxy is gone.
   */
  cleanupCommands(): Promise<readonly CleanupCommand[]>;
}

/** A tool run: `command args`, `input` on its stdin. */
export interface ToolRun {
  readonly command: string;
  readonly args: readonly string[];
  /** Complete lines, each ending in "\n". */
  readonly input?: string;
}

/** A check before a removal: the run succeeds and, when given, prints the line `printsLine`. */
export interface ToolCheck extends ToolRun {
  readonly printsLine?: string;
}

/** One removal of cleanup()'s. */
export interface CleanupCommand extends ToolRun {
  /** What it removes, as cleanup() reports it; the parts of one large removal share it. */
  readonly what: string;
  /**
   * What holds while the object is there as the command expects it. cleanup() runs the command
   * straight after reading the kernel; a later run (a purge) checks these first, since the kernel
   * may have changed since (a reboot, an operator), and never creates what it would delete.
   */
  readonly when: readonly ToolCheck[];
}
