// Which index each endpoint of a key holds in its endpoint map (`VIP . port . index -> endpoint`).
//
// Numbered in the model's order (address order) at every sync, one endpoint arriving or leaving
// in the middle of a big set shifts every index after it: at one Service with 100,000 endpoints,
// one change was ~48,000 element deletes and as many adds (docs/benchmarks-log.md). So an incremental
// sync keeps each endpoint at its index (its slot): an arrival fills a hole or takes index N, a
// departure's hole gets the last endpoint (swap-remove), and the count (`numgen ... mod N`) is the
// key's one dispatch element. One endpoint added, removed or changed touches O(1) elements.
//
// The slots of a service port are a function of its slots before and its endpoints now, kept by
// the live dataplane between syncs (planner.ts): a full sync numbers in the model's order and
// forgets them. A port whose order is the model's has no entry (most ports, most of the time).

import { isDeepStrictEqual } from 'node:util';
import { compareText } from '../../contract/base/compare-text.ts';
import { patchedList, sameItems, walkPaired } from '../../contract/chunked-list.ts';
import type {
  Endpoint,
  EndpointList,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../contract/proxy-state.ts';
import { type TrafficDecisions, trafficDecisions } from '../../contract/traffic-decisions.ts';

/**
 * The endpoint sets a service port's keys dispatch to: `internal` for its ClusterIP, `cluster` for
 * external addresses and node ports (policy Cluster, and Local's short-circuit), `external` for
 * policy Local's own.
 */
export interface EndpointSets {
  readonly internal: EndpointList;
  readonly cluster: EndpointList;
  readonly external: EndpointList;
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
 * How a key's endpoints changed between two model orders (sorted by address, then port): walked
 * together, endpoints shared by identity (the model keeps the objects of unchanged slices) cost a
 * pointer comparison each, and only the others are compared by address and port.
 */
export interface ModelOrderChange {
  /** Endpoints of `before` whose address and port `next` lacks, with their index in `before`. */
  readonly gone: readonly Endpoint[];
  readonly goneAt: readonly number[];
  /** Endpoints of `next` whose address and port `before` lacks, in `next`'s order. */
  readonly came: readonly Endpoint[];
  /** Another object for the same address and port (other conditions): [before, next]. */
  readonly replaced: readonly (readonly [Endpoint, Endpoint])[];
  readonly replacedAt: readonly number[];
}

function compareEndpoints(a: Endpoint, b: Endpoint): number {
  return compareText(a.ip, b.ip) || a.port - b.port;
}

export function modelOrderChange(before: EndpointList, next: EndpointList): ModelOrderChange {
  const change = { gone: [] as Endpoint[], goneAt: [] as number[], came: [] as Endpoint[] };
  const replaced: (readonly [Endpoint, Endpoint])[] = [];
  const replacedAt: number[] = [];
  if (before === next) return { ...change, replaced, replacedAt };
  // Were the orders not sorted, an endpoint in both could come out as gone and come: still a
  // right change, with more elements rewritten. Chunks both lists share are stepped over.
  walkPaired(before, next, (a, b, i) => {
    if (a === b) return 'both';
    if (a === undefined) {
      change.came.push(b!);
      return 'b';
    }
    if (b === undefined) {
      change.gone.push(a);
      change.goneAt.push(i);
      return 'a';
    }
    const order = compareEndpoints(a, b);
    if (order === 0) {
      replaced.push([a, b]);
      replacedAt.push(i);
      return 'both';
    }
    if (order < 0) {
      change.gone.push(a);
      change.goneAt.push(i);
      return 'a';
    }
    change.came.push(b);
    return 'b';
  });
  return { ...change, replaced, replacedAt };
}

/** A key's slot order after a change, and the indexes whose endpoint (address . port) may differ. */
export interface SlotChange {
  readonly order: EndpointList;
  /** Ascending; every index below both lengths whose element may differ, and those between them. */
  readonly changed: readonly number[];
}

function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from) }, (_, k) => from + k);
}

/**
 * Where each of `endpoints` is in `order`: by identity (a scan per endpoint for a few, else one
 * map), else by address and port. The slots of a port its last sync left unchanged hold the
 * objects of the state before it; a caller whose equal states do not share objects (not the
 * ModelCache) hands over other, equal ones.
 */
function positionsIn(order: EndpointList, endpoints: readonly Endpoint[]): number[] {
  let at: Map<Endpoint, number> | undefined;
  if (endpoints.length > 16) {
    at = new Map();
    order.forEach((o, s) => {
      at!.set(o, s);
    });
  }
  let byValue: Map<string, number> | undefined;
  return endpoints.map((ep) => {
    const s = at ? (at.get(ep) ?? -1) : order.indexOf(ep);
    if (s !== -1) return s;
    byValue ??= new Map(order.map((o, k) => [`${o.ip} ${o.port}`, k]));
    return byValue.get(`${ep.ip} ${ep.port}`) ?? -1;
  });
}

/**
 * The slot order of `next` (in the model's order) for a key whose endpoints were `before` (in the
 * model's order) at the slots `current` (a permutation of `before`): an endpoint still there
 * (same address and port) keeps its index; arrivals fill the holes, lowest first, in the model's
 * order, then go at the end; a hole left over gets the last endpoint (swap-remove), so the indexes
 * stay 0..N-1. Besides the walk of the two model orders (a pointer comparison per endpoint, and a
 * copy of the order when it changes), O(endpoints that came, went or changed).
 */
export function assignSlots(
  current: EndpointList,
  before: EndpointList,
  next: EndpointList,
  change = modelOrderChange(before, next),
): SlotChange {
  if (current.length === 0) return { order: next, changed: range(0, next.length) };
  const { gone, came, replaced } = change;
  if (gone.length + came.length + replaced.length === 0) return { order: current, changed: [] };
  // The slots are `current` under these writes (undefined: a hole), cut or grown to `length`:
  // only the indexes a change touches are written, whatever the number of endpoints.
  const writes = new Map<number, Endpoint | undefined>();
  let length = current.length;
  const slot = (i: number) => (writes.has(i) ? writes.get(i) : current.at(i));
  const same = current === before;
  const replacedAt = same
    ? change.replacedAt
    : positionsIn(
        current,
        replaced.map(([a]) => a),
      );
  const holes = (same ? [...change.goneAt] : positionsIn(current, gone)).sort((x, y) => x - y);
  if (replacedAt.includes(-1) || holes.includes(-1))
    throw new Error('endpoint slots: the slot order is not a permutation of the model order');
  // The same address and port in another object: the same element, at the same index.
  replaced.forEach(([, b], k) => {
    writes.set(replacedAt[k]!, b);
  });
  for (const h of holes) writes.set(h, undefined);
  const changed = new Set<number>();
  let h = 0;
  for (const ep of came) {
    if (h < holes.length) {
      changed.add(holes[h]!);
      writes.set(holes[h++]!, ep);
    } else writes.set(length++, ep);
  }
  // Holes left (more left than came): each gets the last endpoint, lowest hole first.
  for (; h < holes.length; h++) {
    while (length > 0 && slot(length - 1) === undefined) length--;
    if (holes[h]! >= length) break;
    changed.add(holes[h]!);
    writes.set(holes[h]!, slot(--length));
  }
  const lengths = [current.length, length];
  for (const i of range(Math.min(...lengths), Math.max(...lengths))) changed.add(i);
  return {
    order: patchedList(current, writes as ReadonlyMap<number, Endpoint>, length),
    changed: [...changed].sort((x, y) => x - y),
  };
}

/** modelOrderChange, walked once per pair of arrays: a port's roles and lists share arrays. */
type Walks = (before: EndpointList, next: EndpointList) => ModelOrderChange;

function walks(): Walks {
  const done: { before: EndpointList; next: EndpointList; change: ModelOrderChange }[] = [];
  return (before, next) => {
    const walked = done.find((w) => w.before === before && w.next === next);
    if (walked) return walked.change;
    const change = modelOrderChange(before, next);
    done.push({ before, next, change });
    return change;
  };
}

/**
 * Per role, the indexes whose endpoint element may differ after a change (undefined: all of them).
 * With the port's other fields unchanged, the elements at the other indexes are the same: an
 * incremental plan builds only these (fragment-index.ts).
 */
/** Per role, ascending indexes of its endpoints. */
export type EndpointIndexes = { readonly [R in keyof EndpointSets]: readonly number[] };

export type ChangedIndexes = { readonly [R in keyof EndpointSets]: readonly number[] | undefined };

/** The next slots of a changed service port, and which of its indexes changed. */
export interface PortSlotChange {
  readonly slots: PortSlots | undefined;
  readonly changed: ChangedIndexes;
}

/**
 * The slots of `next` (a changed service port) after `prev` with `prevSlots` (undefined: the
 * model's order), and the indexes of each role that changed. A port that is new has the model's
 * order.
 */
export function nextPortSlots(
  prev: ServicePort | undefined,
  prevSlots: PortSlots | undefined,
  next: ServicePort,
  walk: Walks = walks(),
): PortSlotChange {
  if (prev === undefined) return { slots: undefined, changed: ALL_INDEXES };
  const dBefore = trafficDecisions(prev);
  const modelBefore = slottedSets(prev, dBefore, undefined);
  const before = slottedSets(prev, dBefore, prevSlots);
  const d = trafficDecisions(next);
  const model = slottedSets(next, d, undefined);
  const slots: { -readonly [R in keyof EndpointSets]?: EndpointList } = {};
  const changed: { -readonly [R in keyof EndpointSets]?: readonly number[] } = {};
  let last: { from: EndpointList; to: EndpointList; assigned: SlotChange } | undefined;
  for (const role of ROLES) {
    // The roles often share one set (internal and cluster, under policy Cluster): assigned once.
    const same = last !== undefined && last.from === before[role] && last.to === model[role];
    const assigned = same
      ? last!.assigned
      : assignSlots(before[role], modelBefore[role], model[role], walk(modelBefore[role], model[role]));
    last = { from: before[role], to: model[role], assigned };
    if (!sameItems(assigned.order, model[role])) slots[role] = assigned.order;
    changed[role] = assigned.changed;
  }
  return {
    slots: Object.keys(slots).length === 0 ? undefined : slots,
    changed: changed as ChangedIndexes,
  };
}

const ALL_INDEXES: ChangedIndexes = { internal: undefined, cluster: undefined, external: undefined };

/** New slots of the `changed` ports of `before` -> `after` (undefined: model order, or gone). */
export type SlotUpdates = ReadonlyMap<ServicePortKey, PortSlots | undefined>;

/**
 * What a change of a service port's endpoints alone (its other fields the same) rewrites: the
 * endpoint elements at `indexes` of each role, and the hairpin pairs of the endpoints that came,
 * went or changed (`before`: as they were, `after`: as they are; from its cluster, then its
 * local endpoints). An incremental plan builds only these for a port that has them
 * (fragment-index.ts): O(change) at any number of endpoints.
 */
export interface EndpointChanges {
  readonly indexes: EndpointIndexes;
  readonly before: readonly Endpoint[];
  readonly after: readonly Endpoint[];
}

export interface SlotPlan {
  readonly updates: SlotUpdates;
  readonly changes: ReadonlyMap<ServicePortKey, EndpointChanges>;
}

export function slotUpdates(
  before: ProxyState,
  after: ProxyState,
  changed: Iterable<ServicePortKey>,
  current: SlotTable,
): SlotPlan {
  const updates = new Map<ServicePortKey, PortSlots | undefined>();
  const changes = new Map<ServicePortKey, EndpointChanges>();
  for (const key of changed) {
    const next = after.servicePorts.get(key);
    const prev = before.servicePorts.get(key);
    if (next === undefined) {
      updates.set(key, undefined);
      continue;
    }
    const walk = walks();
    const { slots, changed: indexes } = nextPortSlots(prev, current.get(key), next, walk);
    updates.set(key, slots);
    const endpointChanges = prev && endpointChangesOf(prev, next, indexes, walk);
    if (endpointChanges) changes.set(key, endpointChanges);
  }
  return { updates, changes };
}

/** The fields that say which endpoints a port has; every other one shapes its keys and rules. */
const NO_ENDPOINT_FIELDS = {
  clusterEndpoints: undefined,
  localEndpoints: undefined,
  hasEndpoints: undefined,
  otherServingEndpoints: undefined,
};

/** Undefined when more than the endpoints changed, or some role's indexes all did. */
function endpointChangesOf(
  prev: ServicePort,
  next: ServicePort,
  indexes: ChangedIndexes,
  walk: Walks,
): EndpointChanges | undefined {
  const { internal, cluster, external } = indexes;
  if (internal === undefined || cluster === undefined || external === undefined) return undefined;
  if (!isDeepStrictEqual({ ...prev, ...NO_ENDPOINT_FIELDS }, { ...next, ...NO_ENDPOINT_FIELDS }))
    return undefined;
  // With affinity, a key whose endpoints differ in port has an element per index more
  // (affinity.ts): one that starts or stops differing rewrites them all.
  if (prev.sessionAffinity && !(onePort(prev) && onePort(next))) return undefined;
  const beforeEps: Endpoint[] = [];
  const afterEps: Endpoint[] = [];
  for (const role of ['clusterEndpoints', 'localEndpoints'] as const) {
    const { gone, came, replaced } = walk(prev[role], next[role]);
    beforeEps.push(...gone, ...replaced.map(([a]) => a));
    afterEps.push(...came, ...replaced.map(([, b]) => b));
  }
  return { indexes: { internal, cluster, external }, before: beforeEps, after: afterEps };
}

function onePort(sp: ServicePort): boolean {
  const port = sp.clusterEndpoints.at(0)?.port ?? sp.localEndpoints.at(0)?.port;
  return [sp.clusterEndpoints, sp.localEndpoints].every((eps) => eps.every((ep) => ep.port === port));
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

/** `each` of the endpoints at `indexes` (ascending; those past the end skipped), else of all. */
export function forEachIndex(
  endpoints: EndpointList,
  indexes: readonly number[] | undefined,
  each: (ep: Endpoint, i: number) => void,
): void {
  if (indexes === undefined) endpoints.forEach(each);
  else for (const i of indexes) if (i < endpoints.length) each(endpoints.at(i)!, i);
}
