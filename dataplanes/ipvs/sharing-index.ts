// Who holds each piece two service ports of one family can share (incremental-ports.ts): the
// addresses of their virtual servers, their node ports, the addresses of their local endpoints
// (hairpin elements). An incremental plan looks the changed ports' pieces up here instead of
// asking every other port whether it holds one, which at 30k services was most of a one-endpoint
// change (a pass over every port and its endpoints).
//
// The live dataplane keeps one per family for the state the kernel holds: built in the background
// after a full sync, updated with each incremental sync it applies (only the changed ports). A plan
// without one builds it from the previous state. A value is the one port holding a piece (nearly
// always) or the set of them.

import { runAll, type Steps } from '../../contract/base/work-slices.ts';
import type {
  Endpoint,
  Protocol,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../contract/proxy-state.ts';

/** Ports indexed between two steps of a build (7–13 ms of work at 10 endpoints a port, load ~6). */
const PORTS_PER_STEP = 1000;

type Holders = ServicePortKey | Set<ServicePortKey>;

/** A port's virtual server addresses (cluster IP, external and load-balancer IPs). */
export function vipAddresses(sp: ServicePort): string[] {
  return sp.clusterIP === ''
    ? [...sp.externalIPs, ...sp.loadBalancerIPs]
    : [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs];
}

/** Every local endpoint of `sp` (cluster and local lists: the hairpin set dedupes). */
export function* localEndpointsOf(sp: ServicePort): Iterable<Endpoint> {
  for (const ep of sp.clusterEndpoints) if (ep.isLocal) yield ep;
  for (const ep of sp.localEndpoints) if (ep.isLocal) yield ep;
}

export class SharingIndex {
  readonly #byAddress = new Map<string, Holders>();
  readonly #byNodePort = new Map<Protocol, Map<number, Holders>>();
  readonly #byLocalEndpoint = new Map<string, Holders>();

  static of(state: ProxyState): SharingIndex {
    return runAll(SharingIndex.buildSteps(state));
  }

  /** of() in steps: the daemon builds the index after a full sync in slices of its event loop. */
  static *buildSteps(state: ProxyState): Steps<SharingIndex> {
    const index = new SharingIndex();
    let count = 0;
    for (const sp of state.servicePorts.values()) {
      index.#add(sp);
      if (++count % PORTS_PER_STEP === 0) yield;
    }
    return index;
  }

  /** The index of `next`, from this one of `prev`: `changed` is every port that differs. */
  update(prev: ProxyState, next: ProxyState, changed: Iterable<ServicePortKey>): void {
    for (const key of changed) {
      const before = prev.servicePorts.get(key);
      if (before) this.#remove(before);
      const after = next.servicePorts.get(key);
      if (after) this.#add(after);
    }
  }

  /** The ports holding one of these addresses, node ports (by protocol) or local endpoint addresses. */
  holders(
    addresses: Iterable<string>,
    nodePorts: ReadonlyMap<Protocol, Iterable<number>>,
    localEndpoints: Iterable<string>,
  ): Set<ServicePortKey> {
    const out = new Set<ServicePortKey>();
    const collect = (holders: Holders | undefined) => {
      if (typeof holders === 'string') out.add(holders);
      else if (holders) for (const key of holders) out.add(key);
    };
    for (const address of addresses) collect(this.#byAddress.get(address));
    for (const [protocol, ports] of nodePorts) {
      const byPort = this.#byNodePort.get(protocol);
      if (byPort) for (const port of ports) collect(byPort.get(port));
    }
    for (const ip of localEndpoints) collect(this.#byLocalEndpoint.get(ip));
    return out;
  }

  // Loops rather than vipAddresses() and localEndpointsOf(): a build runs this for every port.
  #add(sp: ServicePort): void {
    const key = sp.key;
    if (sp.clusterIP !== '') addHolder(this.#byAddress, sp.clusterIP, key);
    for (const address of sp.externalIPs) addHolder(this.#byAddress, address, key);
    for (const address of sp.loadBalancerIPs) addHolder(this.#byAddress, address, key);
    if (sp.nodePort !== 0) {
      const byPort = this.#byNodePort.get(sp.protocol) ?? new Map<number, Holders>();
      this.#byNodePort.set(sp.protocol, byPort);
      addHolder(byPort, sp.nodePort, key);
    }
    for (const ep of sp.clusterEndpoints) if (ep.isLocal) addHolder(this.#byLocalEndpoint, ep.ip, key);
    for (const ep of sp.localEndpoints) if (ep.isLocal) addHolder(this.#byLocalEndpoint, ep.ip, key);
  }

  #remove(sp: ServicePort): void {
    for (const address of vipAddresses(sp)) removeHolder(this.#byAddress, address, sp.key);
    const byPort = this.#byNodePort.get(sp.protocol);
    if (sp.nodePort !== 0 && byPort) removeHolder(byPort, sp.nodePort, sp.key);
    for (const ep of localEndpointsOf(sp)) removeHolder(this.#byLocalEndpoint, ep.ip, sp.key);
  }
}

function addHolder<K>(map: Map<K, Holders>, piece: K, key: ServicePortKey): void {
  const holders = map.get(piece);
  if (holders === undefined) map.set(piece, key);
  else if (typeof holders !== 'string') holders.add(key);
  else if (holders !== key) map.set(piece, new Set([holders, key]));
}

function removeHolder<K>(map: Map<K, Holders>, piece: K, key: ServicePortKey): void {
  const holders = map.get(piece);
  if (holders === key) map.delete(piece);
  else if (typeof holders === 'object' && holders.delete(key) && holders.size === 1) {
    map.set(piece, holders.values().next().value!);
  }
}
