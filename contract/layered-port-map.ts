// The service ports of one state, in key order, as "an earlier map plus a few changes": the next
// state after one endpoint change costs O(changes), not a copy of 30,000 entries, and
// changedServicePorts can list the difference of two such maps from their changes alone. Once the
// changes grow past a bound they are folded into a new plain Map (amortised O(1) per change).
import { compareText } from './base/compare-text.ts';
import type { ServicePort, ServicePortKey } from './proxy-state.ts';

type PortMap = ReadonlyMap<ServicePortKey, ServicePort>;

/** Changes kept on top of a base before they are folded into a new plain map. */
const MAX_CHANGES = 1024;

export class LayeredPortMap implements PortMap {
  /** A plain map in key order, never changed. */
  readonly base: PortMap;
  /** Keys whose value differs from the base; undefined: removed. */
  readonly changes: ReadonlyMap<ServicePortKey, ServicePort | undefined>;
  /** Keys of `changes` the base lacks, in key order. */
  readonly #added: readonly ServicePortKey[];
  readonly size: number;

  private constructor(
    base: PortMap,
    changes: ReadonlyMap<ServicePortKey, ServicePort | undefined>,
    added: readonly ServicePortKey[],
    size: number,
  ) {
    this.base = base;
    this.changes = changes;
    this.#added = added;
    this.size = size;
  }

  /**
   * `prev` with `updates` applied (undefined removes a key); `prev` itself is left as it was. The
   * size and the added keys follow from `prev`'s and the updates alone: walking every change for
   * them cost a rollout's syncs (~1,000 Services changed since the last fold) a millisecond each.
   */
  static next(prev: PortMap, updates: ReadonlyMap<ServicePortKey, ServicePort | undefined>): PortMap {
    const layered = prev instanceof LayeredPortMap ? prev : undefined;
    const base = layered?.base ?? prev;
    const changes = new Map(layered?.changes);
    let size = prev.size;
    // Keys the base lacks that appear or go with these updates; the added keys change only then.
    const toggled: ServicePortKey[] = [];
    for (const [key, port] of updates) {
      const had = prev.get(key) !== undefined;
      const has = port !== undefined;
      if (had !== has) {
        size += has ? 1 : -1;
        if (!base.has(key)) toggled.push(key);
      }
      if (port === base.get(key) && (has || !base.has(key))) changes.delete(key);
      else changes.set(key, port);
    }
    const before = layered === undefined ? [] : layered.#added;
    const added = toggled.length === 0 ? before : addedAfter(before, new Set(toggled), changes);
    const next = new LayeredPortMap(base, changes, added, size);
    return changes.size > MAX_CHANGES ? new Map(next) : next;
  }

  get(key: ServicePortKey): ServicePort | undefined {
    return this.changes.has(key) ? this.changes.get(key) : this.base.get(key);
  }

  has(key: ServicePortKey): boolean {
    return this.get(key) !== undefined;
  }

  forEach(
    callback: (value: ServicePort, key: ServicePortKey, map: PortMap) => void,
    thisArg?: unknown,
  ): void {
    for (const [key, port] of this.entries()) callback.call(thisArg, port, key, this);
  }

  // MergedIterator is what MapIterator describes except for the iterator helpers, which no
  // reader of a ProxyState uses.
  entries(): MapIterator<[ServicePortKey, ServicePort]> {
    return new MergedIterator(this.base, this.changes, this.#added, (key, port) => [key, port]) as never;
  }

  keys(): MapIterator<ServicePortKey> {
    return new MergedIterator(this.base, this.changes, this.#added, (key) => key) as never;
  }

  values(): MapIterator<ServicePort> {
    return new MergedIterator(this.base, this.changes, this.#added, (_, port) => port) as never;
  }

  [Symbol.iterator](): MapIterator<[ServicePortKey, ServicePort]> {
    return this.entries();
  }
}

/**
 * The keys the base lacks that `changes` gives a value, in key order: `before`'s, with the
 * `toggled` keys (each either in `before` or not, and now the other) put in or taken out.
 */
function addedAfter(
  before: readonly ServicePortKey[],
  toggled: ReadonlySet<ServicePortKey>,
  changes: ReadonlyMap<ServicePortKey, ServicePort | undefined>,
): readonly ServicePortKey[] {
  const added = before.filter((key) => !toggled.has(key));
  for (const key of toggled) if (changes.get(key) !== undefined) added.push(key);
  return added.sort(compareText);
}

/**
 * The base's entries with the changes applied and the added keys merged in, in key order. Written
 * out by hand: dataplanes walk all 30k ports on a sync, and a generator costs several times a
 * plain Map's iteration there.
 */
class MergedIterator<T> implements IterableIterator<T> {
  readonly #base: Iterator<[ServicePortKey, ServicePort]>;
  readonly #changes: ReadonlyMap<ServicePortKey, ServicePort | undefined>;
  readonly #added: readonly ServicePortKey[];
  readonly #pick: (key: ServicePortKey, port: ServicePort) => T;
  #i = 0;
  #pending: [ServicePortKey, ServicePort] | undefined;
  #baseDone = false;

  constructor(
    base: PortMap,
    changes: ReadonlyMap<ServicePortKey, ServicePort | undefined>,
    added: readonly ServicePortKey[],
    pick: (key: ServicePortKey, port: ServicePort) => T,
  ) {
    this.#base = base.entries();
    this.#changes = changes;
    this.#added = added;
    this.#pick = pick;
  }

  next(): IteratorResult<T, undefined> {
    for (;;) {
      if (this.#pending === undefined && !this.#baseDone) {
        const step = this.#base.next();
        if (step.done) this.#baseDone = true;
        else this.#pending = step.value;
      }
      const added = this.#added[this.#i];
      const pending = this.#pending;
      if (added !== undefined && (pending === undefined || added < pending[0])) {
        this.#i++;
        return { done: false, value: this.#pick(added, this.#changes.get(added)!) };
      }
      if (pending === undefined) return { done: true, value: undefined };
      this.#pending = undefined;
      const [key, port] = pending;
      const value = this.#changes.has(key) ? this.#changes.get(key) : port;
      if (value !== undefined) return { done: false, value: this.#pick(key, value) };
    }
  }

  [Symbol.iterator](): this {
    return this;
  }
}

/**
 * The keys that may differ between two maps, when they are layers over one base (or one is the
 * other's base); undefined when only a full comparison can tell.
 */
export function candidateChanges(before: PortMap, after: PortMap): Iterable<ServicePortKey> | undefined {
  const baseOf = (map: PortMap) => (map instanceof LayeredPortMap ? map.base : map);
  if (baseOf(before) !== baseOf(after)) return undefined;
  const keys = new Set<ServicePortKey>();
  if (before instanceof LayeredPortMap) for (const key of before.changes.keys()) keys.add(key);
  if (after instanceof LayeredPortMap) for (const key of after.changes.keys()) keys.add(key);
  return keys;
}
