// EndpointSlices → the endpoints of each service port, as kube-proxy's EndpointSliceCache builds
// them: all slices of the service that carry this family's addresses, matched to service ports by
// port name and protocol, deduplicated by ip:port, with the nil condition defaults applied.
import { type EndpointSlice, type EndpointSliceEndpoint, SERVICE_NAME_LABEL } from '../kube/objects.ts';
import { objectRef, type Problem } from './problem.ts';
import { excludedByLabels } from './proxy-labels.ts';
import type { Endpoint, IPFamily } from './proxy-state.ts';

/** An endpoint with the topology hints that decide whether Cluster traffic from this node may use it. */
export interface CandidateEndpoint {
  readonly endpoint: Endpoint;
  /** Hints' zone names; empty when the endpoint has no zone hints. */
  readonly zoneHints: readonly string[];
  /** Hints' node names; empty when the endpoint has no node hints. */
  readonly nodeHints: readonly string[];
}

/** "namespace/service-name" → the service's slices, by slice name (so results do not depend on input order). */
export type SlicesByService = ReadonlyMap<string, readonly EndpointSlice[]>;

/** Groups slices by the Service they belong to, dropping those kube-proxy's informer would not see. */
export function indexSlicesByService(slices: readonly EndpointSlice[], problems: Problem[]): SlicesByService {
  const index = new Map<string, EndpointSlice[]>();
  for (const slice of slices) {
    if (excludedByLabels(slice.metadata)) continue;
    const serviceName = slice.metadata.labels?.[SERVICE_NAME_LABEL];
    if (serviceName === undefined || serviceName === '') {
      problems.push({
        object: objectRef('EndpointSlice', slice.metadata.namespace, slice.metadata.name),
        reason: `metadata.labels: no ${SERVICE_NAME_LABEL} label, so the slice belongs to no Service`,
      });
      continue;
    }
    const unnamed = slice.ports?.findIndex((port) => port.name === undefined) ?? -1;
    if (unnamed >= 0) {
      problems.push({
        object: objectRef('EndpointSlice', slice.metadata.namespace, slice.metadata.name),
        reason: `ports[${unnamed}].name: missing, so the port is ignored (an unnamed port has name "")`,
      });
    }
    const key = `${slice.metadata.namespace ?? 'default'}/${serviceName}`;
    const group = index.get(key);
    if (group === undefined) index.set(key, [slice]);
    else group.push(slice);
  }
  for (const group of index.values()) {
    if (group.length > 1) group.sort((a, b) => compareText(a.metadata.name, b.metadata.name));
  }
  return index;
}

/** The key endpoints are matched on: a slice port and a service port match by name and protocol. */
export function portMatchKey(portName: string, protocol: string): string {
  return `${portName}/${protocol}`;
}

/**
 * The endpoints of one service for `family`, by portMatchKey, each list sorted by ip then port.
 * Slice ports without a name or a port number are ignored, as kube-proxy does.
 */
export function endpointsByPort(
  slices: readonly EndpointSlice[],
  family: IPFamily,
  nodeName: string,
): Map<string, CandidateEndpoint[]> {
  const byPort = new Map<string, Map<string, CandidateEndpoint>>();
  for (const slice of slices) {
    if (slice.addressType !== family) continue;
    for (const port of slice.ports ?? []) {
      if (port.name === undefined || port.port === undefined || port.port === 0) continue;
      const key = portMatchKey(port.name, port.protocol ?? 'TCP');
      let set = byPort.get(key);
      if (set === undefined) {
        set = new Map();
        byPort.set(key, set);
      }
      for (const raw of slice.endpoints ?? []) addEndpoint(set, candidateOf(raw, port.port, nodeName));
    }
  }
  const result = new Map<string, CandidateEndpoint[]>();
  for (const [key, set] of byPort) result.set(key, [...set.values()].sort(compareCandidates));
  return result;
}

function candidateOf(raw: EndpointSliceEndpoint, port: number, nodeName: string): CandidateEndpoint {
  const conditions = raw.conditions;
  // kube-proxy's nil defaults: unknown readiness and serving mean yes, unknown terminating means no.
  const ready = conditions?.ready ?? true;
  const serving = conditions?.serving ?? true;
  const terminating = conditions?.terminating ?? false;
  return {
    endpoint: {
      ip: raw.addresses[0]!,
      port,
      isLocal: nodeName !== '' && raw.nodeName === nodeName,
      ready,
      serving,
      terminating,
    },
    zoneHints: raw.hints?.forZones?.map((hint) => hint.name) ?? [],
    nodeHints: raw.hints?.forNodes?.map((hint) => hint.name) ?? [],
  };
}

/**
 * The same ip:port may appear twice while an endpoint moves between slices, or when a new pod
 * reuses a terminating pod's IP. Like kube-proxy, prefer the copy that is not terminating; where
 * kube-proxy leaves the choice to map order, prefer a ready copy, then the first (slices are in
 * name order), so the result never depends on input order.
 */
function addEndpoint(set: Map<string, CandidateEndpoint>, candidate: CandidateEndpoint): void {
  const key = `${candidate.endpoint.ip}|${candidate.endpoint.port}`;
  const existing = set.get(key);
  if (existing === undefined || preference(candidate.endpoint) > preference(existing.endpoint)) {
    set.set(key, candidate);
  }
}

function preference(endpoint: Endpoint): number {
  return (endpoint.terminating ? 0 : 2) + (endpoint.ready ? 1 : 0);
}

function compareCandidates(a: CandidateEndpoint, b: CandidateEndpoint): number {
  return compareText(a.endpoint.ip, b.endpoint.ip) || a.endpoint.port - b.endpoint.port;
}

/** Plain code-unit order: deterministic and locale-independent. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
