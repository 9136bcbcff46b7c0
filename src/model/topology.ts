// Topology-aware routing for Cluster traffic, as kube-proxy's topologyModeFromHints decides it.
// kube-proxy does not read spec.trafficDistribution itself: the EndpointSlice controller turns
// PreferClose / PreferSameZone / PreferSameNode into the zone and node hints read here.
import type { ReadonlyList } from '../../contract/chunked-list.ts';
import type { CandidateEndpoint } from './endpoints.ts';

export type TopologyMode = 'None' | 'PreferSameNode' | 'PreferSameZone';

/**
 * PreferSameNode when every ready endpoint has node hints and one is hinted for this node;
 * otherwise PreferSameZone when every ready endpoint has zone hints and one is hinted for this
 * node's zone; otherwise None (use every endpoint). Without ready endpoints hints do not matter.
 */
export function topologyMode(
  endpoints: ReadonlyList<CandidateEndpoint>,
  nodeName: string,
  zone: string,
): TopologyMode {
  let hasReady = false;
  let allHaveNodeHints = true;
  let hasForNode = false;
  let allHaveZoneHints = true;
  let hasForZone = false;
  for (const candidate of endpoints) {
    if (!candidate.endpoint.ready) continue;
    hasReady = true;
    if (candidate.nodeHints.length === 0) allHaveNodeHints = false;
    else if (candidate.nodeHints.includes(nodeName)) hasForNode = true;
    if (candidate.zoneHints.length === 0) allHaveZoneHints = false;
    else if (candidate.zoneHints.includes(zone)) hasForZone = true;
  }
  if (!hasReady) return 'None';
  if (allHaveNodeHints && hasForNode) return 'PreferSameNode';
  if (allHaveZoneHints && hasForZone) return 'PreferSameZone';
  return 'None';
}

/** May Cluster traffic from this node use the endpoint under `mode`? (No fallback here.) */
export function availableForTopology(
  candidate: CandidateEndpoint,
  mode: TopologyMode,
  nodeName: string,
  zone: string,
): boolean {
  switch (mode) {
    case 'None':
      return true;
    case 'PreferSameNode':
      return candidate.nodeHints.includes(nodeName);
    case 'PreferSameZone':
      return candidate.zoneHints.includes(zone);
  }
}
