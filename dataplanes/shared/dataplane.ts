// The seam between sync and the dataplanes. Planning is pure: the same states give byte-identical
// output, which is what dry-run prints and what golden files hold. Only a live dataplane's apply
// touches the kernel.
import type { DualStackState } from '../../src/model/proxy-state.ts';

export type DataplaneMode = 'nftables' | 'iptables' | 'ipvs';

export interface DataplanePlanner<Plan> {
  readonly mode: DataplaneMode;
  /** Everything the dataplane owns, for the given state, replacing whatever was there. */
  planFull(state: DualStackState): Plan;
  /** Only what takes a kernel holding planFull(prev) to the ruleset of planFull(next). */
  planIncremental(prev: DualStackState, next: DualStackState): Plan;
  /** The exact input the dataplane feeds its kernel tool (nft -f, iptables-restore, ...). */
  render(plan: Plan): string;
}
