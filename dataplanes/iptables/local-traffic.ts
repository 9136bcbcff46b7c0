// iptables matches for kube-proxy's local-traffic detector: "comes from a pod on this node".
import type { LocalTrafficDetector } from '../../contract/proxy-state.ts';

/**
 * One match per detector value (a packet is local when ANY matches); empty when the detector is
 * 'None' (not implemented: no pod short-circuit, no masquerade of off-cluster traffic).
 */
export function localTrafficMatches(detector: LocalTrafficDetector): readonly string[] {
  switch (detector.mode) {
    case 'ClusterCIDR':
    case 'NodeCIDR':
      return detector.cidrs.map((cidr) => `-s ${cidr}`);
    case 'BridgeInterface':
      return detector.interfaces.map((name) => `-i ${name}`);
    case 'InterfaceNamePrefix':
      return detector.prefixes.map((prefix) => `-i ${prefix}+`);
    case 'None':
      return [];
  }
}

/** The negation of a single match from localTrafficMatches ("-s X" → "! -s X"). */
export function negateMatch(match: string): string {
  return `! ${match}`;
}
