// Which endpoints serve Cluster and Local traffic: kube-proxy's CategorizeEndpoints. Ready
// endpoints are used; when none is ready, serving+terminating ones are, decided separately for
// Cluster and for Local traffic. Topology hints narrow Cluster traffic only.

import type { ReadonlyList } from '../../contract/chunked-list.ts';
import type { Endpoint, EndpointList } from '../../contract/proxy-state.ts';
import { externallyAccessible } from '../../contract/traffic-decisions.ts';
import type { CandidateEndpoint, PortCandidates } from './endpoints.ts';
import type { ServicePortBase } from './service-ports.ts';
import { availableForTopology, topologyMode } from './topology.ts';

export interface EndpointSelection {
  readonly clusterEndpoints: EndpointList;
  readonly localEndpoints: EndpointList;
  readonly hasEndpoints: boolean;
  readonly otherServingEndpoints?: EndpointList;
}

/** Internal traffic uses Cluster policy, or external traffic exists (eTP Local short-circuits through it). */
export function usesClusterEndpoints(port: ServicePortBase): boolean {
  return !port.internalPolicyLocal || externallyAccessible(port);
}

export function usesLocalEndpoints(port: ServicePortBase): boolean {
  return port.internalPolicyLocal || (port.externalPolicyLocal && externallyAccessible(port));
}

const NO_ENDPOINTS: EndpointList = [];
const NONE: EndpointSelection = {
  clusterEndpoints: NO_ENDPOINTS,
  localEndpoints: NO_ENDPOINTS,
  hasEndpoints: false,
};

export function categorizeEndpoints(
  { candidates, whole, counts }: PortCandidates,
  port: ServicePortBase,
  nodeName: string,
  zone: string,
): EndpointSelection {
  if (candidates.length === 0) return NONE;
  const pick = (keep: (candidate: CandidateEndpoint) => boolean) => picked(candidates, whole, keep);
  let clusterEndpoints: EndpointList = NO_ENDPOINTS;
  let localEndpoints: EndpointList = NO_ENDPOINTS;
  let hasEndpoints = false;

  if (usesClusterEndpoints(port)) {
    if (counts?.ready === candidates.length && counts.hinted === 0 && whole !== undefined) {
      // Every candidate ready and none hinted (topology mode None): all of them, told without a
      // pass, as a Service with 100,000 endpoints would walk them twice at each change of one.
      clusterEndpoints = whole;
    } else {
      const mode = topologyMode(candidates, nodeName, zone);
      clusterEndpoints = pick((c) => c.endpoint.ready && availableForTopology(c, mode, nodeName, zone));
      // Topology was already ignored if it left no ready endpoint, so none is ready anywhere.
      if (clusterEndpoints.length === 0) clusterEndpoints = pick((c) => isServingTerminating(c.endpoint));
    }
    hasEndpoints = clusterEndpoints.length > 0;
  }

  if (usesLocalEndpoints(port)) {
    let hasLocalReady = false;
    let hasLocalServingTerminating = false;
    for (const { endpoint } of candidates) {
      if (endpoint.ready) {
        hasEndpoints = true;
        if (endpoint.isLocal) hasLocalReady = true;
      } else if (isServingTerminating(endpoint)) {
        hasEndpoints = true;
        if (endpoint.isLocal) hasLocalServingTerminating = true;
      }
    }
    if (hasLocalReady) {
      localEndpoints = pick((c) => c.endpoint.isLocal && c.endpoint.ready);
    } else if (hasLocalServingTerminating) {
      localEndpoints = pick((c) => c.endpoint.isLocal && isServingTerminating(c.endpoint));
    }
  }
  const otherServingEndpoints = servingOutside(candidates, clusterEndpoints, localEndpoints);
  if (otherServingEndpoints === undefined) return { clusterEndpoints, localEndpoints, hasEndpoints };
  return { clusterEndpoints, localEndpoints, hasEndpoints, otherServingEndpoints };
}

/**
 * Serving candidates that neither set holds; undefined when none. Most ports have none: their
 * Cluster set is every candidate, or every serving one, which one count tells without a set.
 */
function servingOutside(
  candidates: ReadonlyList<CandidateEndpoint>,
  clusterEndpoints: EndpointList,
  localEndpoints: EndpointList,
): EndpointList | undefined {
  // Without a pass: a Service with 100,000 endpoints walks them at each change of one.
  if (clusterEndpoints.length === candidates.length) return undefined;
  let serving = 0;
  for (const { endpoint } of candidates) if (isServing(endpoint)) serving++;
  if (serving === clusterEndpoints.length) return undefined;
  const used = new Set<Endpoint>([...clusterEndpoints, ...localEndpoints]);
  const others: Endpoint[] = [];
  for (const { endpoint } of candidates)
    if (isServing(endpoint) && !used.has(endpoint)) others.push(endpoint);
  return others.length > 0 ? others : undefined;
}

/** kube-proxy's IsServing (a ready endpoint serves, whatever its serving condition says). */
function isServing(endpoint: Endpoint): boolean {
  return endpoint.ready || endpoint.serving;
}

function isServingTerminating(endpoint: Endpoint): boolean {
  return endpoint.serving && endpoint.terminating;
}

/**
 * The endpoints of the kept candidates: `whole` itself when it holds them all (a port served by
 * one slice, every endpoint kept: most ports), else an array of exactly their number.
 */
function picked(
  candidates: ReadonlyList<CandidateEndpoint>,
  whole: EndpointList | undefined,
  keep: (candidate: CandidateEndpoint) => boolean,
): EndpointList {
  let count = 0;
  for (const candidate of candidates) if (keep(candidate)) count++;
  if (count === 0) return NO_ENDPOINTS;
  if (count === candidates.length && whole?.length === count) return whole;
  const result = new Array<Endpoint>(count);
  let i = 0;
  for (const candidate of candidates) if (keep(candidate)) result[i++] = candidate.endpoint;
  return result;
}
