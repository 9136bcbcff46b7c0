// Per-family settings every rule renderer needs, computed once per plan.
import type { IPFamily, NodeSettings, ProxyState } from '../../src/model/proxy-state.ts';
import { localTrafficMatches } from './local-traffic.ts';

export interface FamilyContext {
  readonly family: IPFamily;
  readonly node: NodeSettings;
  /** The masquerade mark, e.g. "0x4000" for bit 14. */
  readonly mark: string;
  /** Matches for "from a local pod"; empty when the detector is 'None'. */
  readonly localMatches: readonly string[];
}

export function familyContext(state: ProxyState): FamilyContext {
  return {
    family: state.family,
    node: state.node,
    mark: `0x${(2 ** state.node.masqueradeBit).toString(16)}`,
    localMatches: localTrafficMatches(state.node.localDetector),
  };
}
