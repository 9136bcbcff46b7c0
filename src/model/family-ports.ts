// One IP family's ports in the incremental model (model-cache.ts): the ports each service last
// published, the ports it asks for while it is denied a claim, and who claims each address and
// node port (address-claims.ts). An update moves the claims of the services that changed and
// publishes what each service whose claims were touched now holds.

import { compareText } from '../../contract/base/compare-text.ts';
import type { Steps } from '../../contract/base/work-slices.ts';
import { sameServicePort } from '../../contract/changed-service-ports.ts';
import type { ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import { ClaimIndex } from './address-claims.ts';

/**
 * A service's ports of one family, distinct keys. An array, not a map: most services have one or
 * two ports, and a map per service costs ~400 bytes (~12 MiB at 30k services).
 */
type PortsOfService = readonly ServicePort[];

const NO_PORTS: PortsOfService = [];

/**
 * A service's published ports as the map keeps them: its one port alone (most services have one),
 * else the array. A one-element array costs 56 bytes (1.6 MiB at 30k services).
 */
type KeptPorts = ServicePort | PortsOfService;

function kept(ports: PortsOfService): KeptPorts {
  return ports.length === 1 ? ports[0]! : ports;
}

function listed(ports: KeptPorts | undefined): PortsOfService {
  return ports === undefined ? NO_PORTS : Array.isArray(ports) ? ports : [ports as ServicePort];
}

/** A service's ports as its objects give them now, and since when it claims them. */
export interface FreshPorts {
  readonly ports: readonly ServicePort[];
  readonly since: number;
}

/** The ports an update added or changed, and undefined for each it removed. */
export type PortUpdates = Map<ServicePortKey, ServicePort | undefined>;

export class FamilyPorts {
  /** The last published ports of each service. */
  readonly #published = new Map<string, KeptPorts>();
  /**
   * The ports a service asks for, kept only while it is denied a claim (conflicts are rare): for
   * every other service they are its published ports.
   */
  readonly #asked = new Map<string, PortsOfService>();
  readonly claims: ClaimIndex;

  /** `sinceOf`: when a port's service claimed it (ClaimIndex). */
  constructor(sinceOf: (port: ServicePort) => number) {
    this.claims = new ClaimIndex(sinceOf);
  }

  /** The services that published ports. */
  services(): Iterable<string> {
    return this.#published.keys();
  }

  /** Every published port. */
  *ports(): Iterable<ServicePort> {
    for (const ports of this.#published.values()) yield* listed(ports);
  }

  /**
   * Recomputes the `dirty` services (`fresh`: their ports now, undefined for one that is gone).
   * First every dirty service's claims move, then each service whose claims were touched
   * publishes what it holds: a loser gets an address back in the update that frees it.
   */
  *update(
    dirty: ReadonlySet<string>,
    fresh: (service: string) => FreshPorts | undefined,
  ): Steps<PortUpdates> {
    const claims = this.claims;
    const nextAsked = new Map<string, PortsOfService>();
    const touched = new Set<string>();
    for (const key of dirty) {
      const now = fresh(key);
      const old = this.#askedOf(key);
      const next = sharedPorts(old, now?.ports ?? []);
      for (const port of old) claims.remove(port, touched);
      if (now !== undefined) for (const port of next) claims.add(port, now.since, touched);
      nextAsked.set(key, next);
      yield;
    }
    const updates: PortUpdates = new Map();
    for (const key of dirty) {
      this.#publish(key, nextAsked.get(key)!, updates);
      yield;
    }
    for (const key of touched) if (!dirty.has(key)) this.#publish(key, this.#askedOf(key), updates);
    return updates;
  }

  /** Every published port, in key order. */
  sorted(): ReadonlyMap<ServicePortKey, ServicePort> {
    const ports: ServicePort[] = [];
    for (const ofService of this.#published.values()) ports.push(...listed(ofService));
    ports.sort((a, b) => compareText(a.key, b.key));
    return new Map(ports.map((port) => [port.key, port]));
  }

  #askedOf(service: string): PortsOfService {
    return this.#asked.get(service) ?? listed(this.#published.get(service));
  }

  /** Publishes what `service` holds of the ports it wants; what changed goes to `updates`. */
  #publish(service: string, wanted: PortsOfService, updates: PortUpdates): void {
    const old = listed(this.#published.get(service));
    const granted = wanted.map((port) => this.claims.granted(port));
    const next = sharedPorts(old, granted);
    const inOld = portFinder(old);
    const inNext = portFinder(next);
    for (const port of next) if (inOld(port.key) !== port) updates.set(port.key, port);
    for (const port of old) if (inNext(port.key) === undefined) updates.set(port.key, undefined);
    if (next.length > 0) this.#published.set(service, kept(next));
    else this.#published.delete(service);
    if (granted.some((port, i) => port !== wanted[i])) this.#asked.set(service, wanted);
    else this.#asked.delete(service);
  }
}

/**
 * The fresh ports of a service by key, each replaced by its previous object when equal. Later
 * entries with the same key win, as they do in buildProxyState's map.
 */
function sharedPorts(old: PortsOfService, fresh: readonly ServicePort[]): PortsOfService {
  const byKey = new Map<ServicePortKey, ServicePort>();
  for (const port of fresh) byKey.set(port.key, port);
  const inOld = portFinder(old);
  // map() allocates the exact length (push over-allocates: 152 bytes for one port).
  return [...byKey.values()].map((port) => {
    const before = inOld(port.key);
    return before !== undefined && sameServicePort(before, port) ? before : port;
  });
}

/**
 * Finds ports by key: a scan for the one or two ports most services have, a map for a service
 * with thousands (a scan per port would be quadratic: seconds at 10,000 ports).
 */
function portFinder(ports: PortsOfService): (key: ServicePortKey) => ServicePort | undefined {
  if (ports.length <= 16) return (key) => ports.find((port) => port.key === key);
  const byKey = new Map(ports.map((port) => [port.key, port]));
  return (key) => byKey.get(key);
}
