// Per-family settings every rule renderer needs, computed once per plan.

import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { NodeSettings, ProxyState } from '../../contract/proxy-state.ts';
import { localTrafficMatches } from './local-traffic.ts';

export interface FamilyContext {
  readonly family: IPFamily;
  readonly node: NodeSettings;
  /** The masquerade mark, e.g. "0x4000" for bit 14. */
  readonly mark: string;
  /** Matches for "from a local pod"; empty when the detector is 'None'. */
  readonly localMatches: readonly string[];
  /**
   * kube-proxy's "large cluster mode": over 1000 endpoints, the per-endpoint rules lose their
   * comments, which are most of the ruleset's size (and of iptables-legacy's kernel blob).
   */
  readonly largeCluster: boolean;
}

const LARGE_CLUSTER_ENDPOINTS = 1000;

export function familyContext(state: ProxyState): FamilyContext {
  return {
    family: state.family,
    node: state.node,
    mark: `0x${(2 ** state.node.masqueradeBit).toString(16)}`,
    localMatches: localTrafficMatches(state.node.localDetector),
    largeCluster: hasMoreEndpointsThan(state, LARGE_CLUSTER_ENDPOINTS),
  };
}

/**
 * Whether the family has more endpoint chains than `limit` (an endpoint serving both policies
 * counts once). Counting stops there: every partial sync asks, and a walk over all 300k endpoints
 * of a large cluster would cost more than the sync's own work.
 */
function hasMoreEndpointsThan(state: ProxyState, limit: number): boolean {
  let count = 0;
  for (const sp of state.servicePorts.values()) {
    // Counted one at a time, so a Service with 100,000 endpoints costs a thousand of them.
    const seen = new Set<string>();
    for (const list of [sp.clusterEndpoints, sp.localEndpoints])
      for (const e of list) {
        seen.add(`${e.ip}:${e.port}`);
        if (count + seen.size > limit) return true;
      }
    count += seen.size;
  }
  return false;
}
