// The service ports an incremental IPVS plan builds: the changed ones, and the unchanged ones that
// share a piece with them. A piece two ports can share (an address bound to the dummy link, a
// virtual server on a node address that is both a node port's and an external IP's, a hairpin
// element, a VIP or node port key of states the model did not resolve) is built from all of its
// ports, so the changed ports' pieces come out as the whole state holds them, while the unchanged
// ports' other pieces are the same before and after and drop out of the diff.
//
// The sharing ports are looked up in an index of the previous state (sharing-index.ts) by the
// pieces of the changed ports: an unchanged port is the same in both states, and so are its pieces.
//
// A changed port in both states builds only its local endpoints (hairpin elements) that differ
// between them: an element both sides would hold drops out of the diff anyway, whoever else holds
// it, so an endpoint change of a wide Service does not build (and sort) its every local endpoint.
import { compareText } from '../../contract/base/compare-text.ts';
import type {
  Endpoint,
  EndpointList,
  Protocol,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../contract/proxy-state.ts';
import { localEndpointsOf, type SharingIndex, vipAddresses } from './sharing-index.ts';
import { nodePortAddresses } from './virtual-servers.ts';

export interface IncrementalPorts {
  /** Ports to build from the previous state, in key order. */
  readonly before: readonly ServicePort[];
  /** Ports to build from the next state, in key order. */
  readonly after: readonly ServicePort[];
  /** The local endpoints whose hairpin elements a port builds (by default all of them), per side. */
  readonly hairpinBefore: HairpinEndpoints;
  readonly hairpinAfter: HairpinEndpoints;
}

/** A port's local endpoints whose hairpin elements are built. */
export type HairpinEndpoints = (sp: ServicePort) => Iterable<Endpoint>;

/** What the changed ports hold that another port could hold too. */
class SharedPieces {
  /** Addresses of their virtual servers (and node addresses when one has a node port). */
  readonly addresses = new Set<string>();
  /** Ports of their virtual servers on node addresses, and their node ports, by protocol. */
  readonly nodeAddressPorts = new Map<Protocol, Set<number>>();
  /** Addresses of their local endpoints (hairpin elements). */
  readonly localEndpoints = new Set<string>();
  readonly #nodeAddresses: ReadonlySet<string>;

  constructor(nodeAddresses: readonly string[]) {
    this.#nodeAddresses = new Set(nodeAddresses);
  }

  /** `localIps`: the addresses of the hairpin elements `sp` is built with. */
  add(sp: ServicePort, localIps: Iterable<string>): void {
    for (const address of vipAddresses(sp)) {
      this.addresses.add(address);
      if (this.#nodeAddresses.has(address)) this.#nodeAddressPort(sp.protocol, sp.port);
    }
    if (sp.nodePort !== 0) {
      for (const address of this.#nodeAddresses) this.addresses.add(address);
      this.#nodeAddressPort(sp.protocol, sp.nodePort);
    }
    for (const ip of localIps) this.localEndpoints.add(ip);
  }

  #nodeAddressPort(protocol: Protocol, port: number): void {
    const ports = this.nodeAddressPorts.get(protocol) ?? new Set<number>();
    ports.add(port);
    this.nodeAddressPorts.set(protocol, ports);
  }
}

/**
 * The ports to build for a change of `changed` between two states of one family with the same
 * node settings (so the same node-port addresses); `sharing` is the index of `prev`.
 */
export function incrementalPorts(
  prev: ProxyState,
  next: ProxyState,
  changed: ReadonlySet<ServicePortKey>,
  sharing: SharingIndex,
): IncrementalPorts {
  const keys = [...changed].sort(compareText);
  const changedBefore = keys.flatMap((key) => prev.servicePorts.get(key) ?? []);
  const changedAfter = keys.flatMap((key) => next.servicePorts.get(key) ?? []);
  // The local endpoints of a changed port in both states that differ between them, per side.
  const differing = {
    before: new Map<ServicePortKey, Endpoint[]>(),
    after: new Map<ServicePortKey, Endpoint[]>(),
  };
  for (const key of keys) {
    const [a, b] = [prev.servicePorts.get(key), next.servicePorts.get(key)];
    if (a === undefined || b === undefined) continue;
    const changes = localEndpointChanges(a, b);
    differing.before.set(key, changes.before);
    differing.after.set(key, changes.after);
  }
  const shared = new SharedPieces(nodePortAddresses(next));
  // Per changed port, the addresses of the hairpin elements it holds on one side only.
  const oneSided = new Map<ServicePortKey, Set<string>>();
  const note = (sp: ServicePort, locals: Iterable<Endpoint>) => {
    const ips = oneSided.get(sp.key) ?? new Set<string>();
    for (const ep of locals) ips.add(ep.ip);
    oneSided.set(sp.key, ips);
    shared.add(sp, ips);
  };
  for (const sp of changedBefore) note(sp, differing.before.get(sp.key) ?? localEndpointsOf(sp));
  for (const sp of changedAfter) note(sp, differing.after.get(sp.key) ?? localEndpointsOf(sp));
  // A changed port holding on both sides an element another changed port holds on one side only
  // builds it (both sides), so the element comes out as the whole state holds it.
  const othersOneSided = (key: ServicePortKey): Set<string> => {
    const ips = new Set<string>();
    for (const [other, set] of oneSided) if (other !== key) for (const ip of set) ips.add(ip);
    return ips;
  };
  for (const key of differing.before.keys()) {
    const others = othersOneSided(key);
    if (others.size === 0) continue;
    const both = (sp: ServicePort) => [...localEndpointsOf(sp)].filter((ep) => others.has(ep.ip));
    differing.before.get(key)!.push(...both(prev.servicePorts.get(key)!));
    differing.after.get(key)!.push(...both(next.servicePorts.get(key)!));
  }
  const hairpinBefore: HairpinEndpoints = (sp) => differing.before.get(sp.key) ?? localEndpointsOf(sp);
  const hairpinAfter: HairpinEndpoints = (sp) => differing.after.get(sp.key) ?? localEndpointsOf(sp);
  const sharingPorts: ServicePort[] = [];
  for (const key of sharing.holders(shared.addresses, shared.nodeAddressPorts, shared.localEndpoints)) {
    if (!changed.has(key)) sharingPorts.push(next.servicePorts.get(key)!);
  }
  return {
    before: inKeyOrder(changedBefore, sharingPorts),
    after: inKeyOrder(changedAfter, sharingPorts),
    hairpinBefore,
    hairpinAfter,
  };
}

/**
 * The local endpoints of one port's two states that are not local endpoints of the other (by ip
 * and port). The model keeps the objects of endpoints that did not change, so each list pair is
 * compared by pointer (differentObjects); only the few objects left are compared by value.
 */
export function localEndpointChanges(
  before: ServicePort,
  after: ServicePort,
): { before: Endpoint[]; after: Endpoint[] } {
  const out = { before: [] as Endpoint[], after: [] as Endpoint[] };
  // Both lists of each side: the hairpin set holds an endpoint local in either.
  const lists = [
    [before.clusterEndpoints, after.clusterEndpoints, before.localEndpoints, after.localEndpoints],
    [before.localEndpoints, after.localEndpoints, before.clusterEndpoints, after.clusterEndpoints],
  ] as const;
  for (const [a, b, otherA, otherB] of lists) {
    const [onlyA, onlyB] = differentObjects(a, b);
    const inA = localKeys(onlyA);
    const inB = localKeys(onlyB);
    for (const ep of onlyA)
      if (ep.isLocal && !inB.has(localKey(ep)) && !isLocalIn(otherB, ep)) out.before.push(ep);
    for (const ep of onlyB)
      if (ep.isLocal && !inA.has(localKey(ep)) && !isLocalIn(otherA, ep)) out.after.push(ep);
  }
  return out;
}

function localKey(ep: Endpoint): string {
  return `${ep.ip}|${ep.port}`;
}

function localKeys(eps: EndpointList): Set<string> {
  return new Set(eps.filter((ep) => ep.isLocal).map(localKey));
}

function isLocalIn(list: EndpointList, ep: Endpoint): boolean {
  return list.some(
    (other) => other === ep || (other.port === ep.port && other.isLocal && other.ip === ep.ip),
  );
}

/** How far differentObjects looks for the same object again after a mismatch. */
const RESYNC_STEPS = 8;

/**
 * Objects of `a` not matched in `b` and of `b` not matched in `a`, by one walk of both: where they
 * part, the nearest pair of the same object within RESYNC_STEPS resumes the walk (an endpoint
 * added or removed shifts the rest by one), else both objects count as changed. An object the
 * walk passed by in both comes out on both sides: callers compare by value anyway.
 */
function differentObjects(a: EndpointList, b: EndpointList): [Endpoint[], Endpoint[]] {
  const onlyA: Endpoint[] = [];
  const onlyB: Endpoint[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a.at(i) === b.at(j)) {
      i++;
      j++;
      continue;
    }
    let [di, dj] = [1, 1];
    search: for (let steps = 1; steps <= RESYNC_STEPS; steps++) {
      for (let x = 0; x <= steps; x++) {
        const y = steps - x;
        if (i + x < a.length && j + y < b.length && a.at(i + x) === b.at(j + y)) {
          [di, dj] = [x, y];
          break search;
        }
      }
    }
    for (let k = 0; k < di; k++) onlyA.push(a.at(i + k)!);
    for (let k = 0; k < dj; k++) onlyB.push(b.at(j + k)!);
    i += di;
    j += dj;
  }
  for (; i < a.length; i++) onlyA.push(a.at(i)!);
  for (; j < b.length; j++) onlyB.push(b.at(j)!);
  return [onlyA, onlyB];
}

function inKeyOrder(a: readonly ServicePort[], b: readonly ServicePort[]): ServicePort[] {
  if (b.length === 0) return [...a];
  return [...a, ...b].sort((x, y) => compareText(x.key, y.key));
}
