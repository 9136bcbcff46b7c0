// The incremental model: fed object changes one by one (as informer events arrive), it recomputes
// only the services they touch and publishes the next DualStackState with the exact set of changed
// service ports. Unchanged ServicePort objects are shared by identity with the previous state, so
// changedServicePorts and the dataplanes' own comparisons stay cheap at any cluster size.
//
// Its states deep-equal buildProxyState over the same objects (the property test checks that).
// A node change recomputes everything, as the node's IPs, CIDRs and zone feed every service; so
// does a change of the service CIDRs (service-cidrs.ts), which are part of the node settings.
import { isDeepStrictEqual } from 'node:util';
import type { IPFamily } from '../base/ip-family.ts';
import type { Problem } from '../base/problem.ts';
import { runAll, runInSlices, SLICE_MS, type Steps } from '../base/work-slices.ts';
import {
  type EndpointSlice,
  type Node,
  type ObjectMeta,
  type Service,
  type ServiceCIDR,
  ZONE_LABEL,
} from '../kube/objects.ts';
import { ClaimIndex, conflictProblems, serviceOfPort, serviceSince } from './address-claims.ts';
import { serviceKey } from './build-state.ts';
import {
  bySliceName,
  compareText,
  type SliceEndpoints,
  sliceEndpoints,
  sliceKey,
  sliceOwner,
} from './endpoints.ts';
import { LayeredPortMap } from './layered-port-map.ts';
import { type NodeSettingsByFamily, nodeSettingsByFamily, type ProxyOptions } from './node-settings.ts';
import type { DualStackState, NodeSettings, ProxyState, ServicePort, ServicePortKey } from './proxy-state.ts';
import { serviceCIDRsOf } from './service-cidrs.ts';
import { serviceStatePorts } from './service-port-state.ts';

export interface ModelUpdate {
  readonly state: DualStackState;
  /** Service ports added, removed or different since the previous update, in either family. */
  readonly changed: ReadonlySet<ServicePortKey>;
  /** Everything was recomputed (the first update, or the node changed): sync in full. */
  readonly full: boolean;
  readonly problems: readonly Problem[];
}

/**
 * A service's ports of one family, distinct keys. An array, not a map: most services have one or
 * two ports, and a map per service costs ~400 bytes (~12 MiB at 30k services).
 */
type PortsOfService = readonly ServicePort[];

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];
const NO_PORTS: PortsOfService = [];

function isOneSlice(kept: SliceEndpoints | readonly SliceEndpoints[]): kept is SliceEndpoints {
  return !Array.isArray(kept);
}

export class ModelCache {
  readonly #options: ProxyOptions;
  #services = new Map<string, Service>();
  /** The records of the slices that belong to a service, by slice key. */
  readonly #slices = new Map<string, SliceEndpoints>();
  /** Only slices with problems, so collecting them does not walk every slice. */
  readonly #sliceProblems = new Map<string, readonly Problem[]>();
  /**
   * Service "namespace/name" → the records of its slices, in slice-name order: a service's one
   * slice (the usual case) alone, not in an array of one (56 bytes, 1.6 MiB at 30k services).
   */
  readonly #slicesOfService = new Map<string, SliceEndpoints | readonly SliceEndpoints[]>();
  #node: Node | undefined;
  /** The cluster's ServiceCIDR objects by name. */
  readonly #serviceCIDRs = new Map<string, ServiceCIDR>();
  /** Services to recompute at the next update. */
  readonly #dirty = new Set<string>();
  #all = true;
  #settings: NodeSettingsByFamily = {};
  #nodeProblems: readonly Problem[] = [];
  /** Per family, the last published ports of each service. */
  readonly #ports: Record<IPFamily, Map<string, PortsOfService>> = { IPv4: new Map(), IPv6: new Map() };
  /**
   * Per family, the ports a service asks for, kept only while it is denied a claim (conflicts are
   * rare): for every other service they are its published ports.
   */
  readonly #asked: Record<IPFamily, Map<string, PortsOfService>> = { IPv4: new Map(), IPv6: new Map() };
  /** Per family, who claims each address:port/protocol and node port (address-claims.ts). */
  readonly #claims: Record<IPFamily, ClaimIndex> = { IPv4: this.#newClaims(), IPv6: this.#newClaims() };
  #state: DualStackState = {};

  constructor(options: ProxyOptions) {
    this.#options = options;
  }

  setService(service: Service): void {
    const built = serviceKey(service);
    // Its slices' owner when they came first: one string for both maps (#servicesUnderSliceKeys).
    const key = this.#sliceOwnerOf(built) ?? built;
    this.#services.set(key, service);
    this.#dirty.add(key);
  }

  deleteService(service: { readonly metadata: ObjectMeta }): void {
    const key = serviceKey(service);
    this.#services.delete(key);
    this.#dirty.add(key);
  }

  /**
   * The slice is not kept: only the model's record of it (endpoints.ts). `key`: its sliceKey, the
   * informer's string when it passes it (one string for both).
   */
  setEndpointSlice(slice: EndpointSlice, key = sliceKey(slice.metadata)): void {
    const previous = this.#slices.get(key);
    this.#dropSlice(key);
    const problems: Problem[] = [];
    const built = sliceOwner(slice.metadata, problems);
    if (built !== undefined) {
      // One string for all of a service's slices (#servicesUnderSliceKeys).
      const owner = built === previous?.owner ? previous.owner : (this.#sliceOwnerOf(built) ?? built);
      // Its unchanged endpoints keep their objects (endpoints.ts).
      const record = sliceEndpoints(slice, owner, this.#options.nodeName, problems, key, previous);
      // Under the record's own key: one "namespace/name" string per slice.
      this.#slices.set(record.key, record);
      this.#setSlicesOf(owner, this.#slicesOf(owner).concat(record).sort(bySliceName));
      this.#dirty.add(owner);
    }
    if (problems.length > 0) this.#sliceProblems.set(key, problems);
  }

  /** Only the slice's metadata is read: an informer keeps no more of a slice (proxy-informers.ts). */
  deleteEndpointSlice(slice: { readonly metadata: ObjectMeta }, key = sliceKey(slice.metadata)): void {
    this.#dropSlice(key);
  }

  /**
   * This node's Node object (undefined when it is gone). Returns whether anything the model takes
   * from it changed (node IPs, pod CIDRs, topology zone, the problems they raise): only then is
   * everything recomputed and a full sync due. A heartbeat changes none of them.
   */
  setNode(node: Node | undefined): boolean {
    const changed = !isDeepStrictEqual(this.#fromNode(this.#node), this.#fromNode(node));
    this.#node = node;
    if (changed) this.#all = true;
    return changed;
  }

  /**
   * A ServiceCIDR object, or its deletion. Returns whether the service CIDRs changed: only then
   * is everything recomputed and a full sync due.
   */
  setServiceCIDR(object: ServiceCIDR): boolean {
    return this.#changeServiceCIDRs(() => this.#serviceCIDRs.set(object.metadata.name, object));
  }

  deleteServiceCIDR(object: { readonly metadata: ObjectMeta }): boolean {
    return this.#changeServiceCIDRs(() => this.#serviceCIDRs.delete(object.metadata.name));
  }

  #changeServiceCIDRs(change: () => void): boolean {
    const before = this.#cidrs([]);
    change();
    const changed = !isDeepStrictEqual(before, this.#cidrs([]));
    if (changed) this.#all = true;
    return changed;
  }

  #cidrs(problems: Problem[]): string[] {
    return serviceCIDRsOf(this.#serviceCIDRs.values(), this.#options.serviceCIDRs ?? [], problems);
  }

  /** What the model derives from a Node object. */
  #fromNode(node: Node | undefined) {
    const problems: Problem[] = [];
    const settings = nodeSettingsByFamily(this.#options, node, problems, this.#cidrs([]));
    return { settings, problems, zone: node?.metadata.labels?.[ZONE_LABEL] ?? '' };
  }

  /** The state after every change fed so far, and what changed since the previous update. */
  update(): ModelUpdate {
    return runAll(this.#updating());
  }

  /**
   * The same, computed in slices that give the event loop a turn in between (a first update at
   * 30k services takes over a second). Changes fed meanwhile count for the next update.
   */
  updateInSlices(sliceMs = SLICE_MS): Promise<ModelUpdate> {
    return runInSlices(this.#updating(), sliceMs);
  }

  *#updating(): Steps<ModelUpdate> {
    const full = this.#all;
    // Cleared at once: a node or CIDR change fed while this update pauses makes the next one full.
    this.#all = false;
    const changed = new Set<ServicePortKey>();
    if (full) {
      // Each of these walks every service (tens of ms at 30k): a pause may come between them.
      this.#recomputeSettings(changed);
      yield;
      this.#services = this.#servicesUnderSliceKeys();
      yield;
    }
    // Taken now: what is fed while the update pauses is dirty for the next one.
    const dirty = full ? this.#everyService() : new Set(this.#dirty);
    this.#dirty.clear();
    const options = this.#options;
    const zone = this.#node?.metadata.labels?.[ZONE_LABEL] ?? '';
    const state: { [F in IPFamily]?: ProxyState } = {};
    for (const family of FAMILIES) {
      const node = this.#settings[family];
      if (node === undefined) continue;
      const byService = this.#ports[family];
      const asked = this.#asked[family];
      const claims = this.#claims[family];
      const askedOf = (key: string) => asked.get(key) ?? byService.get(key) ?? NO_PORTS;
      // First every dirty service's claims move, then each service whose claims were touched
      // publishes what it holds: a loser gets an address back in the update that frees it.
      const nextAsked = new Map<string, PortsOfService>();
      const touched = new Set<string>();
      for (const key of dirty) {
        const service = this.#services.get(key);
        const fresh = service
          ? serviceStatePorts(service, this.#slicesOf(key), family, options.nodeName, zone)
          : [];
        const old = askedOf(key);
        const next = sharedPorts(old, fresh);
        for (const port of old) claims.remove(port, touched);
        if (service !== undefined) {
          const since = serviceSince(service);
          for (const port of next) claims.add(port, since, touched);
        }
        nextAsked.set(key, next);
        yield;
      }
      // undefined: the port is gone.
      const updates = new Map<ServicePortKey, ServicePort | undefined>();
      const publish = (key: string): void => {
        const wanted = nextAsked.get(key) ?? askedOf(key);
        const old = byService.get(key) ?? NO_PORTS;
        const granted = wanted.map((port) => claims.granted(port));
        const next = sharedPorts(old, granted);
        const inOld = portFinder(old);
        const inNext = portFinder(next);
        for (const port of next) if (inOld(port.key) !== port) updates.set(port.key, port);
        for (const port of old) if (inNext(port.key) === undefined) updates.set(port.key, undefined);
        if (next.length > 0) byService.set(key, next);
        else byService.delete(key);
        if (granted.some((port, i) => port !== wanted[i])) asked.set(key, wanted);
        else asked.delete(key);
      };
      for (const key of dirty) {
        publish(key);
        yield;
      }
      for (const key of touched) if (!dirty.has(key)) publish(key);
      for (const portKey of updates.keys()) changed.add(portKey);
      const prev = this.#state[family];
      // A full update's sort of every port below is a step of its own.
      if (full || prev === undefined) yield;
      const servicePorts =
        full || prev === undefined
          ? sortedPorts(byService)
          : updates.size === 0
            ? prev.servicePorts
            : LayeredPortMap.next(prev.servicePorts, updates);
      state[family] =
        prev?.node === node && prev.servicePorts === servicePorts ? prev : { family, node, servicePorts };
    }
    this.#state = state;
    return { state, changed, full, problems: this.#problems() };
  }

  #dropSlice(key: string): void {
    this.#sliceProblems.delete(key);
    const record = this.#slices.get(key);
    if (record === undefined) return;
    this.#slices.delete(key);
    this.#setSlicesOf(
      record.owner,
      this.#slicesOf(record.owner).filter((other) => other !== record),
    );
    this.#dirty.add(record.owner);
  }

  /**
   * The services map rebuilt with each Service under its slices' owner string: a Service's key
   * and its slices' owner are equal strings built apart (a second one per service is ~1 MiB at
   * 30k), and a Map hands back no key to share. Done at a full update, before the published ports
   * take their keys from it: the cold start's first update shares them whatever order the
   * objects came in. (Re-keying one entry at a time grew the map by as much as it saved.)
   */
  #servicesUnderSliceKeys(): Map<string, Service> {
    const services = new Map<string, Service>();
    for (const [key, service] of this.#services) services.set(this.#sliceOwnerOf(key) ?? key, service);
    return services;
  }

  /** Services the next update recomputes may already be new here: their claims are re-added then. */
  #newClaims(): ClaimIndex {
    return new ClaimIndex((port) => {
      const service = this.#services.get(serviceOfPort(port));
      return service === undefined ? Number.POSITIVE_INFINITY : serviceSince(service);
    });
  }

  #slicesOf(service: string): readonly SliceEndpoints[] {
    const kept = this.#slicesOfService.get(service);
    if (kept === undefined) return [];
    return isOneSlice(kept) ? [kept] : kept;
  }

  /** The owner string a service's slices hold, if it has any (no array made for it). */
  #sliceOwnerOf(service: string): string | undefined {
    const kept = this.#slicesOfService.get(service);
    if (kept === undefined) return undefined;
    return isOneSlice(kept) ? kept.owner : kept[0]?.owner;
  }

  #setSlicesOf(service: string, records: readonly SliceEndpoints[]): void {
    if (records.length === 0) this.#slicesOfService.delete(service);
    else this.#slicesOfService.set(service, records.length === 1 ? records[0]! : records);
  }

  /** New node settings; a family no longer served loses all its ports. */
  #recomputeSettings(changed: Set<ServicePortKey>): void {
    const problems: Problem[] = [];
    const settings: { -readonly [F in IPFamily]?: NodeSettings } = nodeSettingsByFamily(
      this.#options,
      this.#node,
      problems,
      this.#cidrs(problems),
    );
    for (const family of FAMILIES) {
      const prev = this.#settings[family];
      const next = settings[family];
      if (next === undefined) {
        for (const ports of this.#ports[family].values()) for (const port of ports) changed.add(port.key);
        this.#ports[family].clear();
        this.#asked[family].clear();
        this.#claims[family] = this.#newClaims();
      }
      // Same settings keep their identity, so an unchanged family's state can be kept whole.
      if (prev !== undefined && next !== undefined && isDeepStrictEqual(prev, next)) settings[family] = prev;
    }
    this.#settings = settings;
    this.#nodeProblems = problems;
  }

  #everyService(): Set<string> {
    const keys = new Set(this.#services.keys());
    for (const family of FAMILIES) for (const key of this.#ports[family].keys()) keys.add(key);
    return keys;
  }

  #problems(): Problem[] {
    const problems = [...this.#nodeProblems, ...conflictProblems([this.#claims.IPv4, this.#claims.IPv6])];
    for (const ofSlice of this.#sliceProblems.values()) problems.push(...ofSlice);
    return problems;
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
    return before !== undefined && isDeepStrictEqual(before, port) ? before : port;
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

function sortedPorts(
  byService: ReadonlyMap<string, PortsOfService>,
): ReadonlyMap<ServicePortKey, ServicePort> {
  const ports: ServicePort[] = [];
  for (const ofService of byService.values()) ports.push(...ofService);
  ports.sort((a, b) => compareText(a.key, b.key));
  return new Map(ports.map((port) => [port.key, port]));
}
