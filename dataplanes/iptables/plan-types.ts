// The shape of an iptables plan, shared by the modules that build, cut and print it.
import type { IPFamily } from '../../contract/base/ip-family.ts';

/** Chain name → rules, in declaration order. */
export type Chains = ReadonlyMap<string, readonly string[]>;

export type IptablesTable = 'filter' | 'nat' | 'mangle';

export interface JumpRule {
  readonly table: IptablesTable;
  /** The built-in chain the jump sits in. */
  readonly from: string;
  /** The rule without "-A CHAIN", as iptables -C takes it (one argument per word). */
  readonly spec: readonly string[];
}

export interface TableChanges {
  readonly table: IptablesTable;
  /** Chains rewritten: declared (which creates or flushes them), then filled with `rules`. */
  readonly chains: Chains;
  /** Chains removed: declared (flushed), then deleted with -X after every rule is in place. */
  readonly deleted: readonly string[];
  /** Jumps from built-in chains into ours, inserted at the chain's head once our chains are filled. */
  readonly jumps: readonly JumpRule[];
}

export interface FamilyPlan {
  readonly family: IPFamily;
  /** Tables with something to do, in restore order (filter before nat, as kube-proxy). */
  readonly tables: readonly TableChanges[];
}

export interface IptablesPlan {
  readonly kind: 'full' | 'incremental';
  readonly IPv4?: FamilyPlan;
  readonly IPv6?: FamilyPlan;
}
