// The incremental model: fed object changes one by one (as informer events arrive), it recomputes
// only the services they touch and publishes the next DualStackState with the exact set of changed
// service ports. Unchanged ServicePort objects are shared by identity with the previous state, so
// changedServicePorts and the dataplanes' own comparisons stay cheap at any cluster size.
//
// Its states deep-equal buildProxyState over the same objects (the property test checks that).
// A node change recomputes everything, as the node's IPs, CIDRs and zone feed every service; so
// does a change of the service CIDRs (service-cidrs.ts), which are part of the node settings.
import { isDeepStrictEqual } from 'node:util';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { Problem } from '../../contract/base/problem.ts';
import { runAll, runInSlices, SLICE_MS, type Steps } from '../../contract/base/work-slices.ts';
import { CHUNKS } from '../../contract/chunked-list.ts';
import { LayeredPortMap } from '../../contract/layered-port-map.ts';
import type { DualStackState, NodeSettings, ProxyState, ServicePortKey } from '../../contract/proxy-state.ts';
import {
  type EndpointSlice,
  type Node,
  type ObjectMeta,
  type Service,
  type ServiceCIDR,
  ZONE_LABEL,
} from '../kube/objects.ts';
import { conflictProblems, serviceOfPort, serviceSince } from './address-claims.ts';
import { serviceKey } from './build-state.ts';
import { CandidateMerges } from './candidate-merges.ts';
import { type SliceEndpoints, sliceEndpoints, sliceKey, sliceOwner } from './endpoints.ts';
import { FamilyPorts } from './family-ports.ts';
import { keptService, type ProxiedService } from './kept-service.ts';
import { type NodeSettingsByFamily, nodeSettingsByFamily, type ProxyOptions } from './node-settings.ts';
import { serviceCIDRsOf } from './service-cidrs.ts';
import { serviceStatePorts } from './service-port-state.ts';
import { SlicesOfService } from './slices-of-service.ts';

export interface ModelUpdate {
  readonly state: DualStackState;
  /** Service ports added, removed or different since the previous update, in either family. */
  readonly changed: ReadonlySet<ServicePortKey>;
  /** Everything was recomputed (the first update, or the node changed): sync in full. */
  readonly full: boolean;
  readonly problems: readonly Problem[];
}

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

export class ModelCache {
  readonly #options: ProxyOptions;
  /** What the model reads of each Service (kept-service.ts). */
  readonly #services = new Map<string, ProxiedService>();
  /** The records of the slices that belong to a service, by slice key. */
  readonly #slices = new Map<string, SliceEndpoints>();
  /** Only slices with problems, so collecting them does not walk every slice. */
  readonly #sliceProblems = new Map<string, readonly Problem[]>();
  /** Service "namespace/name" → the records of its slices. */
  readonly #slicesOfService = new SlicesOfService();
  /** The candidates of ports with several slices, merged into at a change of one. */
  readonly #candidateMerges: CandidateMerges;
  #node: Node | undefined;
  /** The cluster's ServiceCIDR objects by name. */
  readonly #serviceCIDRs = new Map<string, ServiceCIDR>();
  /** Services to recompute at the next update. */
  readonly #dirty = new Set<string>();
  #all = true;
  #settings: NodeSettingsByFamily = {};
  #nodeProblems: readonly Problem[] = [];
  /** Per family, each service's ports and who claims each address and node port. */
  readonly #ports: Record<IPFamily, FamilyPorts> = { IPv4: this.#newPorts(), IPv6: this.#newPorts() };
  #state: DualStackState = {};

  /** `shape`: which endpoint lists are chunked (contract/chunked-list.ts; tests chunk small ones). */
  constructor(options: ProxyOptions, shape = CHUNKS) {
    this.#options = options;
    this.#candidateMerges = new CandidateMerges(shape);
  }

  /** `key`: its serviceKey, the informer's string when it passes it (one string for both). */
  setService(service: Service, key = serviceKey(service)): void {
    const shared = this.serviceKeyOf(key);
    this.#services.set(shared, keptService(service, shared));
    this.#dirty.add(shared);
  }

  /**
   * The string the model holds for service key `key` (its slices' owner, or its Service's), else
   * `key` itself: one "namespace/name" string per Service for the model's maps, its slices and the
   * informer's store, which keeps this one (proxy-informers.ts), whichever object came first.
   */
  serviceKeyOf(key: string): string {
    return this.#slicesOfService.ownerOf(key) ?? this.#services.get(key)?.key ?? key;
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
    const built = sliceOwner(slice.metadata, problems, this.#options.serviceProxyName);
    if (built !== undefined) {
      // One string for all of a service's slices and its Service (serviceKeyOf).
      const owner = built === previous?.owner ? previous.owner : this.serviceKeyOf(built);
      // Its unchanged endpoints keep their objects (endpoints.ts).
      const record = sliceEndpoints(slice, owner, this.#options.nodeName, problems, key, previous);
      // Under the record's own key: one "namespace/name" string per slice.
      this.#slices.set(record.key, record);
      this.#slicesOfService.add(record);
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
      // It walks every service (tens of ms at 30k): a pause comes after it.
      this.#recomputeSettings(changed);
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
      const ports = this.#ports[family];
      const updates = yield* ports.update(dirty, (key) => {
        const service = this.#services.get(key);
        if (service === undefined) {
          this.#candidateMerges.forget(key);
          return undefined;
        }
        const fresh = this.#candidateMerges.ofService(key, family, (candidatesOf) =>
          serviceStatePorts(
            service,
            this.#slicesOfService.of(key),
            family,
            options.nodeName,
            zone,
            options.serviceProxyName,
            candidatesOf,
          ),
        );
        return { ports: fresh, since: serviceSince(service) };
      });
      for (const portKey of updates.keys()) changed.add(portKey);
      const prev = this.#state[family];
      // A full update's sort of every port below is a step of its own.
      if (full || prev === undefined) yield;
      const servicePorts =
        full || prev === undefined
          ? ports.sorted()
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
    this.#slicesOfService.delete(record);
    this.#dirty.add(record.owner);
  }

  /** Services the next update recomputes may already be new here: their claims are re-added then. */
  #newPorts(): FamilyPorts {
    return new FamilyPorts((port) => {
      const service = this.#services.get(serviceOfPort(port));
      return service === undefined ? Number.POSITIVE_INFINITY : serviceSince(service);
    });
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
        for (const port of this.#ports[family].ports()) changed.add(port.key);
        this.#ports[family] = this.#newPorts();
      }
      // Same settings keep their identity, so an unchanged family's state can be kept whole.
      if (prev !== undefined && next !== undefined && isDeepStrictEqual(prev, next)) settings[family] = prev;
    }
    this.#settings = settings;
    this.#nodeProblems = problems;
  }

  #everyService(): Set<string> {
    const keys = new Set(this.#services.keys());
    for (const family of FAMILIES) for (const key of this.#ports[family].services()) keys.add(key);
    return keys;
  }

  #problems(): Problem[] {
    const problems = [
      ...this.#nodeProblems,
      ...conflictProblems([this.#ports.IPv4.claims, this.#ports.IPv6.claims]),
    ];
    for (const ofSlice of this.#sliceProblems.values()) problems.push(...ofSlice);
    return problems;
  }
}
