// The service ports an incremental IPVS plan builds: the changed ones, and the unchanged ones that
// share a piece with them. A piece two ports can share (an address bound to the dummy link, a
// virtual server on a node address that is both a node port's and an external IP's, a hairpin
// element, a VIP or node port key of states the model did not resolve) is built from all of its
// ports, so the changed ports' pieces come out as the whole state holds them, while the unchanged
// ports' other pieces are the same before and after and drop out of the diff.
//
// The sharing ports are found in one pass over the unchanged ports that builds nothing: it looks up
// each port's addresses, node port and local endpoints in small sets made from the changed ports.
import type { Protocol, ProxyState, ServicePort, ServicePortKey } from '../../src/model/proxy-state.ts';
import { compareText, nodePortAddresses } from './virtual-servers.ts';

export interface IncrementalPorts {
  /** Ports to build from the previous state, in key order. */
  readonly before: readonly ServicePort[];
  /** Ports to build from the next state, in key order. */
  readonly after: readonly ServicePort[];
}

function vipAddresses(sp: ServicePort): string[] {
  return sp.clusterIP === ''
    ? [...sp.externalIPs, ...sp.loadBalancerIPs]
    : [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs];
}

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

  add(sp: ServicePort): void {
    for (const address of vipAddresses(sp)) {
      this.addresses.add(address);
      if (this.#nodeAddresses.has(address)) this.#nodeAddressPort(sp.protocol, sp.port);
    }
    if (sp.nodePort !== 0) {
      for (const address of this.#nodeAddresses) this.addresses.add(address);
      this.#nodeAddressPort(sp.protocol, sp.nodePort);
    }
    for (const ep of sp.clusterEndpoints) if (ep.isLocal) this.localEndpoints.add(ep.ip);
    for (const ep of sp.localEndpoints) if (ep.isLocal) this.localEndpoints.add(ep.ip);
  }

  /** Whether `sp` may hold one of these pieces (no false negatives; rare false positives). */
  sharedBy(sp: ServicePort): boolean {
    if (sp.clusterIP !== '' && this.addresses.has(sp.clusterIP)) return true;
    for (const address of sp.externalIPs) if (this.addresses.has(address)) return true;
    for (const address of sp.loadBalancerIPs) if (this.addresses.has(address)) return true;
    if (sp.nodePort !== 0 && this.nodeAddressPorts.get(sp.protocol)?.has(sp.nodePort)) return true;
    if (this.localEndpoints.size === 0) return false;
    for (const ep of sp.clusterEndpoints) if (ep.isLocal && this.localEndpoints.has(ep.ip)) return true;
    for (const ep of sp.localEndpoints) if (ep.isLocal && this.localEndpoints.has(ep.ip)) return true;
    return false;
  }

  #nodeAddressPort(protocol: Protocol, port: number): void {
    const ports = this.nodeAddressPorts.get(protocol) ?? new Set<number>();
    ports.add(port);
    this.nodeAddressPorts.set(protocol, ports);
  }
}

/**
 * The ports to build for a change of `changed` between two states of one family with the same
 * node settings (so the same node-port addresses).
 */
export function incrementalPorts(
  prev: ProxyState,
  next: ProxyState,
  changed: ReadonlySet<ServicePortKey>,
): IncrementalPorts {
  const keys = [...changed].sort(compareText);
  const changedBefore = keys.flatMap((key) => prev.servicePorts.get(key) ?? []);
  const changedAfter = keys.flatMap((key) => next.servicePorts.get(key) ?? []);
  const shared = new SharedPieces(nodePortAddresses(next));
  for (const sp of changedBefore) shared.add(sp);
  for (const sp of changedAfter) shared.add(sp);
  const sharing: ServicePort[] = [];
  if (changedBefore.length + changedAfter.length > 0) {
    for (const sp of next.servicePorts.values()) {
      if (!changed.has(sp.key) && shared.sharedBy(sp)) sharing.push(sp);
    }
  }
  return { before: inKeyOrder(changedBefore, sharing), after: inKeyOrder(changedAfter, sharing) };
}

function inKeyOrder(a: readonly ServicePort[], b: readonly ServicePort[]): ServicePort[] {
  if (b.length === 0) return [...a];
  return [...a, ...b].sort((x, y) => compareText(x.key, y.key));
}
