// Which index each endpoint of a key holds in its endpoint map (`VIP . port . index -> endpoint`).
//
// Numbered in the model's order (address order) at every sync, one endpoint arriving or leaving
// in the middle of a big set shifts every index after it: at one Service with 100,000 endpoints,
// one change was ~48,000 element deletes and as many adds (docs/benchmarks.md). So an incremental
// sync keeps each endpoint at its index (its slot): an arrival fills a hole or takes index N, a
// departure's hole gets the last endpoint (swap-remove), and the count (`numgen ... mod N`) is the
// key's one dispatch element. One endpoint added, removed or changed touches O(1) elements.
//
// The slots of a service port are a function of its slots before and its endpoints now, kept by
// the live dataplane between syncs (planner.ts): a full sync numbers in the model's order and
// forgets them. A port whose order is the model's has no entry (most ports, most of the time).
import type { Endpoint, ProxyState, ServicePort, ServicePortKey } from '../../src/model/proxy-state.ts';
import { type TrafficDecisions, trafficDecisions } from '../../src/model/traffic-decisions.ts';

/**
 * The endpoint sets a service port's keys dispatch to: `internal` for its ClusterIP, `cluster` for
 * external addresses and node ports (policy Cluster, and Local's short-circuit), `external` for
 * policy Local's own.
 */
export interface EndpointSets {
  readonly internal: readonly Endpoint[];
  readonly cluster: readonly Endpoint[];
  readonly external: readonly Endpoint[];
}

/** A port's sets in slot order, where that is not the model's order. */
export type PortSlots = Partial<EndpointSets>;

/** The slots of a family's service ports that are not in the model's order. */
export interface SlotTable {
  get(key: ServicePortKey): PortSlots | undefined;
}

/** A family's slot table as the live dataplane keeps it between syncs. */
export type SlotRecord = Map<ServicePortKey, PortSlots>;

const ROLES = ['internal', 'cluster', 'external'] as const;

/** The sets of `sp` in slot order: the model's, where `slots` has no other. */
export function slottedSets(
  sp: ServicePort,
  d: TrafficDecisions,
  slots: PortSlots | undefined,
): EndpointSets {
  const model: EndpointSets = {
    internal: d.internalEndpoints,
    cluster: sp.clusterEndpoints,
    external: d.externalEndpoints,
  };
  if (slots === undefined) return model;
  for (const role of ROLES) {
    const order = slots[role];
    if (order !== undefined && order.length !== model[role].length)
      throw new Error(
        `endpoint slots of ${sp.key} (${role}) hold ${order.length}, not ${model[role].length}`,
      );
  }
  return {
    internal: slots.internal ?? model.internal,
    cluster: slots.cluster ?? model.cluster,
    external: slots.external ?? model.external,
  };
}

/**
 * The slot order of `next` (in the model's order) for a key whose endpoints were `current` (in slot
 * order): an endpoint still there (same address and port) keeps its index; arrivals fill the
 * holes, lowest first, in the model's order, then go at the end; a hole left over gets the last
 * endpoint (swap-remove), so the indexes stay 0..N-1. Endpoints equal in address and port are
 * matched in turn. Every changed index is an element rewritten: O(endpoints that came or went).
 */
export function assignSlots(current: readonly Endpoint[], next: readonly Endpoint[]): readonly Endpoint[] {
  if (current.length === 0) return next;
  // The model sorts by address, so one address's endpoints are adjacent: its first index finds
  // them, without a string per endpoint (100,000 of them at a wide Service). Were they not
  // adjacent, a missed match would come out as a departure and an arrival: still a right order.
  const firstOf = new Map<string, number>();
  for (let i = next.length - 1; i >= 0; i--) firstOf.set(next[i]!.ip, i);
  const taken = new Uint8Array(next.length);
  const slots: (Endpoint | undefined)[] = new Array(current.length);
  const holes: number[] = [];
  for (let s = 0; s < current.length; s++) {
    const ep = current[s]!;
    let j = firstOf.get(ep.ip);
    while (j !== undefined && j < next.length && next[j]!.ip === ep.ip) {
      if (!taken[j] && next[j]!.port === ep.port) break;
      j++;
    }
    if (j !== undefined && j < next.length && next[j]!.ip === ep.ip) {
      taken[j] = 1;
      slots[s] = next[j];
    } else holes.push(s);
  }
  let h = 0;
  for (let j = 0; j < next.length; j++) {
    if (taken[j]) continue;
    if (h < holes.length) slots[holes[h++]!] = next[j];
    else slots.push(next[j]);
  }
  // Holes left (more left than came): each gets the last endpoint, lowest hole first.
  for (; h < holes.length; h++) {
    while (slots.length > 0 && slots[slots.length - 1] === undefined) slots.pop();
    if (holes[h]! >= slots.length) break;
    slots[holes[h]!] = slots.pop();
  }
  return slots as Endpoint[];
}

function sameOrder(a: readonly Endpoint[], b: readonly Endpoint[]): boolean {
  return a === b || (a.length === b.length && a.every((ep, i) => ep === b[i]));
}

/**
 * The slots of `next` (a changed service port) after `prev` with `prevSlots`; undefined when they
 * are the model's order. A port that is new has the model's order.
 */
export function nextPortSlots(
  prev: ServicePort | undefined,
  prevSlots: PortSlots | undefined,
  next: ServicePort,
): PortSlots | undefined {
  if (prev === undefined) return undefined;
  const before = slottedSets(prev, trafficDecisions(prev), prevSlots);
  const d = trafficDecisions(next);
  const model = slottedSets(next, d, undefined);
  const slots: { -readonly [R in keyof EndpointSets]?: readonly Endpoint[] } = {};
  let last: { from: readonly Endpoint[]; to: readonly Endpoint[]; order: readonly Endpoint[] } | undefined;
  for (const role of ROLES) {
    // The roles often share one set (internal and cluster, under policy Cluster): assigned once.
    const same = last !== undefined && last.from === before[role] && last.to === model[role];
    const order = same ? last!.order : assignSlots(before[role], model[role]);
    last = { from: before[role], to: model[role], order };
    if (!sameOrder(order, model[role])) slots[role] = order;
  }
  return Object.keys(slots).length === 0 ? undefined : slots;
}

/** New slots of the `changed` ports of `before` -> `after` (undefined: model order, or gone). */
export type SlotUpdates = ReadonlyMap<ServicePortKey, PortSlots | undefined>;

export function slotUpdates(
  before: ProxyState,
  after: ProxyState,
  changed: Iterable<ServicePortKey>,
  current: SlotTable,
): SlotUpdates {
  const updates = new Map<ServicePortKey, PortSlots | undefined>();
  for (const key of changed) {
    const next = after.servicePorts.get(key);
    const prev = before.servicePorts.get(key);
    updates.set(key, next && nextPortSlots(prev, current.get(key), next));
  }
  return updates;
}

/** `current` with `updates` applied, without copying it. */
export function updatedSlots(current: SlotTable, updates: SlotUpdates): SlotTable {
  return { get: (key) => (updates.has(key) ? updates.get(key) : current.get(key)) };
}

/** Applies `updates` to a record, once the sync that planned them is in the kernel. */
export function commitSlots(record: SlotRecord, updates: SlotUpdates): void {
  for (const [key, slots] of updates) {
    if (slots === undefined) record.delete(key);
    else record.set(key, slots);
  }
}
