// nft matches for kube-proxy's local-traffic detector ("comes from a pod on this node").
import type { LocalTrafficDetector } from '../../../contract/proxy-state.ts';
import type { FamilySyntax } from './family-syntax.ts';

function oneOrSet(items: readonly string[]): string {
  return items.length === 1 ? items[0]! : `{ ${items.join(', ')} }`;
}

/** Matches of which ANY marks local pod traffic; empty when the detector is 'None'. */
export function localTrafficMatches(syntax: FamilySyntax, detector: LocalTrafficDetector): readonly string[] {
  switch (detector.mode) {
    case 'ClusterCIDR':
    case 'NodeCIDR':
      return detector.cidrs.length === 0 ? [] : [`${syntax.ip} saddr ${oneOrSet(detector.cidrs)}`];
    case 'BridgeInterface':
      return detector.interfaces.length === 0 ? [] : [`iifname ${oneOrSet(detector.interfaces.map(q))}`];
    case 'InterfaceNamePrefix':
      // Wildcards do not work inside anonymous sets: one match per prefix.
      return detector.prefixes.map((prefix) => `iifname ${q(`${prefix}*`)}`);
    case 'None':
      return [];
  }
}

/** One match for "not local pod traffic"; undefined when the detector is 'None'. */
export function notLocalTrafficMatch(
  syntax: FamilySyntax,
  detector: LocalTrafficDetector,
): string | undefined {
  switch (detector.mode) {
    case 'ClusterCIDR':
    case 'NodeCIDR':
      return detector.cidrs.length === 0 ? undefined : `${syntax.ip} saddr != ${oneOrSet(detector.cidrs)}`;
    case 'BridgeInterface':
      return detector.interfaces.length === 0
        ? undefined
        : `iifname != ${oneOrSet(detector.interfaces.map(q))}`;
    case 'InterfaceNamePrefix':
      return detector.prefixes.length === 0
        ? undefined
        : detector.prefixes.map((prefix) => `iifname != ${q(`${prefix}*`)}`).join(' ');
    case 'None':
      return undefined;
  }
}

function q(text: string): string {
  return `"${text}"`;
}
