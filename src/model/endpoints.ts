// EndpointSlices → the endpoints of each service port, as kube-proxy's EndpointSliceCache builds
// them: all slices of the service that carry this family's addresses, matched to service ports by
// port name and protocol, deduplicated by ip:port, with the nil condition defaults applied.
//
// A slice is turned into the model's record of it (SliceEndpoints) once, when it arrives: the
// Endpoint objects every ProxyState then shares, already checked against this node. The model
// keeps that record instead of the slice, so a decoded slice is garbage once its event is handled
// (at 30,000 ten-endpoint slices the slices held ~50 MiB more than their records).

import { compareText } from '../../contract/base/compare-text.ts';
import { flatText } from '../../contract/base/flat-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { objectRef, type Problem } from '../../contract/base/problem.ts';
import type { ReadonlyList } from '../../contract/chunked-list.ts';
import type { Endpoint, EndpointList } from '../../contract/proxy-state.ts';
import {
  type EndpointHints,
  type EndpointSlice,
  type EndpointSliceEndpoint,
  type ObjectMeta,
  SERVICE_NAME_LABEL,
} from '../kube/objects.ts';
import { PackedEndpoint } from './packed-endpoint.ts';
import { sliceExcluded } from './proxy-labels.ts';

/** An endpoint with the topology hints that decide whether Cluster traffic from this node may use it. */
export interface CandidateEndpoint {
  readonly endpoint: Endpoint;
  /** endpoint.ip, made once: candidates are deduplicated and sorted by it. */
  readonly ip: string;
  /** Hints' zone names; empty when the endpoint has no zone hints. */
  readonly zoneHints: readonly string[];
  /** Hints' node names; empty when the endpoint has no node hints. */
  readonly nodeHints: readonly string[];
}

/**
 * One usable port of a slice and the slice's endpoints on it: in address order, one per address
 * (the copy a service's endpoint list would keep), so that a port served by this slice alone can
 * share this array as its endpoint list.
 */
export interface SlicePortEndpoints {
  /** portMatchKey of the slice port. */
  readonly matchKey: string;
  readonly endpoints: readonly Endpoint[];
}

/** What the model keeps of one EndpointSlice, whatever its ports. */
interface SliceRecord {
  /**
   * The slice's "namespace/name" (sliceKey), the one string the model also keys it by. A service's
   * slices are read in this order, so results never depend on arrival: they share the namespace,
   * so it is their names' order.
   */
  readonly key: string;
  /** The "namespace/name" of the Service it belongs to (sliceOwner). */
  readonly owner: string;
  /** The slice's addressType: its endpoints serve only that family's state. */
  readonly addressType: string;
  /** Per endpoint (in the order of every port's list), its hints; absent when no endpoint has any. */
  readonly hints?: readonly (EndpointHints | undefined)[];
}

/**
 * The model's record of one EndpointSlice; slicePorts reads its usable ports. Most slices have
 * one: the record is that port's entry too, where a ports array and an entry in it cost 96 bytes
 * (2.7 MiB at 30,000 slices).
 */
export type SliceEndpoints =
  | (SliceRecord & SlicePortEndpoints)
  | (SliceRecord & { readonly ports: readonly SlicePortEndpoints[] });

/** "namespace/service-name" → the service's slice records, in slice-name order. */
export type SlicesByService = ReadonlyMap<string, readonly SliceEndpoints[]>;

const NO_NAMES: readonly string[] = [];

/**
 * The "namespace/name" of the Service a slice belongs to; undefined for a slice kube-proxy's
 * informer would not see, or one that names no service (a problem).
 */
export function sliceOwner(
  metadata: ObjectMeta,
  problems: Problem[],
  proxyName?: string,
): string | undefined {
  if (sliceExcluded(metadata, proxyName)) return undefined;
  const serviceName = metadata.labels?.[SERVICE_NAME_LABEL];
  if (serviceName === undefined || serviceName === '') {
    problems.push({
      object: objectRef('EndpointSlice', metadata.namespace, metadata.name),
      reason: `metadata.labels: no ${SERVICE_NAME_LABEL} label, so the slice belongs to no Service`,
    });
    return undefined;
  }
  return flatText(metadata.namespace ?? 'default', '/', serviceName);
}

/**
 * The model's record of a slice, for a proxy on `nodeName`. Slice ports without a name or a port
 * number are left out, as kube-proxy ignores them; an unnamed one is reported. An endpoint the
 * same as in `previous` (the slice's record before this update of it) is that record's object:
 * endpoints the same object in two states are unchanged, which lets a dataplane find a change of a
 * port with 100,000 endpoints by comparing pointers (nftables' endpoint-slots.ts), down to the
 * endpoints that changed, not the slice's hundred.
 */
export function sliceEndpoints(
  slice: EndpointSlice,
  owner: string,
  nodeName: string,
  problems: Problem[],
  key = sliceKey(slice.metadata),
  previous?: SliceEndpoints,
): SliceEndpoints {
  const raw = addressOrder(slice.endpoints ?? []);
  const usable: { readonly matchKey: string; readonly port: number }[] = [];
  for (const [i, port] of (slice.ports ?? []).entries()) {
    if (port.name === undefined) {
      problems.push({
        object: objectRef('EndpointSlice', slice.metadata.namespace, slice.metadata.name),
        reason: `ports[${i}].name: missing, so the port is ignored (an unnamed port has name "")`,
      });
    } else if (port.port !== undefined && port.port !== 0) {
      usable.push({ matchKey: keptMatchKey(port.name, port.protocol ?? 'TCP'), port: port.port });
    }
  }
  // Kept arrays are made by map(): one grown by push keeps room for 16 more (~130 bytes per slice).
  const before = previous === undefined ? [] : slicePorts(previous);
  const ports = usable.map(({ matchKey, port }) => {
    const kept = keptEndpoints(before.find((other) => other.matchKey === matchKey));
    return { matchKey, endpoints: raw.map((endpoint) => kept(endpointOf(endpoint, port, nodeName))) };
  });
  const one = ports.length === 1 ? ports[0]! : undefined;
  const record: SliceEndpoints =
    one === undefined
      ? { key, owner, addressType: slice.addressType, ports }
      : { key, owner, addressType: slice.addressType, matchKey: one.matchKey, endpoints: one.endpoints };
  return raw.some((endpoint) => endpoint.hints !== undefined)
    ? { ...record, hints: raw.map((endpoint) => endpoint.hints) }
    : record;
}

/** The usable ports of a slice's record. */
export function slicePorts(record: SliceEndpoints): readonly SlicePortEndpoints[] {
  return 'ports' in record ? record.ports : [record];
}

/** Swaps an endpoint for the same one of `previous` (one per address), where it has it. */
function keptEndpoints(previous: SlicePortEndpoints | undefined): (endpoint: PackedEndpoint) => Endpoint {
  if (previous === undefined) return (endpoint) => endpoint;
  const byAddress = new Map<number | string, PackedEndpoint>();
  for (const endpoint of previous.endpoints)
    if (endpoint instanceof PackedEndpoint) byAddress.set(endpoint.address, endpoint);
  return (endpoint) => {
    const same = byAddress.get(endpoint.address);
    return same !== undefined && same.portAndFlags === endpoint.portAndFlags ? same : endpoint;
  };
}

function endpointOf(raw: EndpointSliceEndpoint, port: number, nodeName: string): PackedEndpoint {
  return new PackedEndpoint(raw.addresses[0]!, port, conditionsOf(raw, nodeName));
}

/** kube-proxy's nil defaults: unknown readiness and serving mean yes, unknown terminating means no. */
function conditionsOf(raw: EndpointSliceEndpoint, nodeName: string): Omit<Endpoint, 'ip' | 'port'> {
  const conditions = raw.conditions;
  return {
    isLocal: nodeName !== '' && raw.nodeName === nodeName,
    ready: conditions?.ready ?? true,
    serving: conditions?.serving ?? true,
    terminating: conditions?.terminating ?? false,
  };
}

/** A slice's endpoints in address order, one per address: the copy portCandidates would keep. */
function addressOrder(raw: readonly EndpointSliceEndpoint[]): EndpointSliceEndpoint[] {
  const kept = new Map<string, EndpointSliceEndpoint>();
  for (const endpoint of raw) {
    const ip = endpoint.addresses[0]!;
    const other = kept.get(ip);
    if (other === undefined || preference(conditionsOf(endpoint, '')) > preference(conditionsOf(other, ''))) {
      kept.set(ip, endpoint);
    }
  }
  return [...kept.values()].sort((a, b) => compareText(a.addresses[0]!, b.addresses[0]!));
}

/** Groups the records of slices by the Service they belong to, each group in slice-name order. */
export function indexSlicesByService(
  slices: readonly EndpointSlice[],
  nodeName: string,
  problems: Problem[],
  proxyName?: string,
): SlicesByService {
  const index = new Map<string, SliceEndpoints[]>();
  for (const slice of slices) {
    const owner = sliceOwner(slice.metadata, problems, proxyName);
    if (owner === undefined) continue;
    const record = sliceEndpoints(slice, owner, nodeName, problems);
    const group = index.get(owner);
    if (group === undefined) index.set(owner, [record]);
    else group.push(record);
  }
  for (const group of index.values()) if (group.length > 1) group.sort(bySliceName);
  return index;
}

export function bySliceName(a: SliceEndpoints, b: SliceEndpoints): number {
  return compareText(a.key, b.key);
}

/** A slice's "namespace/name". */
export function sliceKey(metadata: { readonly namespace?: string; readonly name: string }): string {
  return flatText(metadata.namespace ?? 'default', '/', metadata.name);
}

/** The key endpoints are matched on: a slice port and a service port match by name and protocol. */
export function portMatchKey(portName: string, protocol: string): string {
  return `${portName}/${protocol}`;
}

/** Kept match keys, one instance each: a cluster has a few distinct port names, and 30,000 slices. */
const keptMatchKeys = new Map<string, string>();

function keptMatchKey(portName: string, protocol: string): string {
  const key = portMatchKey(portName, protocol);
  const kept = keptMatchKeys.get(key);
  if (kept !== undefined) return kept;
  if (keptMatchKeys.size >= 4096) keptMatchKeys.clear();
  const flat = flatText(portName, '/', protocol);
  keptMatchKeys.set(flat, flat);
  return flat;
}

/**
 * The candidates of one service port; `whole`, when there is one, is an array already made of
 * exactly their endpoints in their order: one slice's own array when it alone provided them, or
 * the one a kept merge makes (candidate-merges.ts).
 */
export interface PortCandidates {
  readonly candidates: ReadonlyList<CandidateEndpoint>;
  readonly whole: EndpointList | undefined;
  /** Known without a pass over them (a kept merge counts as it goes: candidate-merges.ts). */
  readonly counts?: CandidateCounts;
}

/** How many candidates are ready, and how many have topology hints. */
export interface CandidateCounts {
  readonly ready: number;
  readonly hinted: number;
}

/** One slice's endpoints for one port, with the slice's hints. */
export interface SlicePortSource {
  readonly port: SlicePortEndpoints;
  readonly hints: SliceEndpoints['hints'];
}

/**
 * Where each port's endpoints come from, by portMatchKey, in slice-name order: cheap to make, so a
 * service's candidates can be made port by port (portCandidates). Made for all ports at once, the
 * candidates of a Service with 10,000 ports × 100 endpoints would be a million objects at once.
 */
export function slicePortsByKey(
  slices: readonly SliceEndpoints[],
  family: IPFamily,
): Map<string, SlicePortSource[]> {
  const byPort = new Map<string, SlicePortSource[]>();
  const add = (port: SlicePortEndpoints, hints: SliceEndpoints['hints']) => {
    const source = { port, hints };
    const found = byPort.get(port.matchKey);
    if (found === undefined) byPort.set(port.matchKey, [source]);
    else found.push(source);
  };
  for (const slice of slices) {
    if (slice.addressType !== family) continue;
    // A one-port record is its port (slicePorts would make an array of it, a thousand a change
    // of a Service with a thousand slices).
    if ('ports' in slice) for (const port of slice.ports) add(port, slice.hints);
    else add(slice, slice.hints);
  }
  return byPort;
}

/** The candidates of one port from its sources (slicePortsByKey), sorted by ip then port. */
export function portCandidates(sources: readonly SlicePortSource[]): PortCandidates {
  return {
    candidates: oneOfEach(sortedCandidates(sources)),
    whole: sources.length === 1 ? sources[0]!.port.endpoints : undefined,
  };
}

/** Every candidate of `sources`, sorted by ip then port, the copies of one in source order. */
export function sortedCandidates(sources: readonly SlicePortSource[]): CandidateEndpoint[] {
  const all: CandidateEndpoint[] = [];
  for (const source of sources) sourceCandidates(source, all);
  // Sorted, then one per ip:port (oneOfEach): the copies of one are adjacent, in slice order (the
  // sort is stable), which a map keyed by an "ip|port" string per endpoint found at ~1.5 us each
  // (150 ms per change of a Service with 100,000 endpoints). Each source is sorted already: the
  // sort merges runs.
  all.sort(compareCandidates);
  return all;
}

/** The candidates of one source, in its order (address order), pushed onto `into`. */
export function sourceCandidates({ port, hints }: SlicePortSource, into: CandidateEndpoint[]): void {
  // An index loop: entries() makes a pair per endpoint, hundreds of thousands at a cold start.
  const { endpoints } = port;
  for (let i = 0; i < endpoints.length; i++) into.push(candidateOf(endpoints[i]!, hints?.[i]));
}

/** One candidate per ip:port of `sorted` (sortedCandidates), the preferred copy of each. */
export function oneOfEach(sorted: readonly CandidateEndpoint[]): CandidateEndpoint[] {
  const candidates: CandidateEndpoint[] = [];
  for (const candidate of sorted) {
    const last = candidates[candidates.length - 1];
    if (last === undefined || compareCandidates(last, candidate) !== 0) candidates.push(candidate);
    else if (preference(candidate.endpoint) > preference(last.endpoint))
      candidates[candidates.length - 1] = candidate;
  }
  return candidates;
}

function candidateOf(endpoint: Endpoint, hints: EndpointHints | undefined): CandidateEndpoint {
  return {
    endpoint,
    ip: endpoint.ip,
    zoneHints: hints?.forZones?.map((hint) => hint.name) ?? NO_NAMES,
    nodeHints: hints?.forNodes?.map((hint) => hint.name) ?? NO_NAMES,
  };
}

/*
 * The same ip:port may appear twice while an endpoint moves between slices, or when a new pod
 * reuses a terminating pod's IP. Like kube-proxy, portCandidates prefers the copy that is not
 * terminating; where kube-proxy leaves the choice to map order, a ready copy, then the first
 * (slices are in name order), so the result never depends on input order.
 */
function preference(endpoint: Pick<Endpoint, 'terminating' | 'ready'>): number {
  return (endpoint.terminating ? 0 : 2) + (endpoint.ready ? 1 : 0);
}

export function compareCandidates(a: CandidateEndpoint, b: CandidateEndpoint): number {
  return compareText(a.ip, b.ip) || a.endpoint.port - b.endpoint.port;
}
