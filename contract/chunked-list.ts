// Immutable lists that a change of a few items copies a few chunks of, not the whole (issue 33).
//
// A service port with 100,000 endpoints would otherwise get a new array of 100,000 at each change
// of one, in the model's state and again in the nftables dataplane's slot order: on this project's
// VMs an array past V8's regular object size (~16,000 pointers) is a fresh mapping whose pages
// fault in one by one, 4-8 ms each, however little changed. A ChunkedList is that array in chunks
// of about 1,024 items; its next version shares every chunk it did not touch, so two versions are
// also compared chunk by chunk (sameRuns).
//
// Most lists stay arrays: `ReadonlyList` is what both are read through.

/** What readers of a list may use: a readonly array is one, and so is a ChunkedList. */
export interface ReadonlyList<T> extends Iterable<T> {
  readonly length: number;
  at(index: number): T | undefined;
  indexOf(item: T): number;
  includes(item: T): boolean;
  some(test: (item: T) => boolean): boolean;
  every(test: (item: T) => boolean): boolean;
  map<U>(each: (item: T, index: number) => U): U[];
  filter(test: (item: T) => boolean): T[];
  forEach(each: (item: T, index: number) => void): void;
}

/** When a list is chunked, and how. */
export interface ChunkShape {
  /** Lists longer than this are made chunked; shorter ones stay (or become) arrays. */
  readonly chunkedFrom: number;
  /** Items a chunk is made with; an edit splits a chunk past twice this, and drops an empty one. */
  readonly chunk: number;
}

/**
 * Chunks of 1,024 pointers (8 KiB) are ordinary heap objects, and a list of 100,000 has ~100 of
 * them to step over; below 4,096 items an array's copy costs less than the chunks' upkeep.
 */
export const CHUNKS: ChunkShape = { chunkedFrom: 4096, chunk: 1024 };

export class ChunkedList<T> implements ReadonlyList<T> {
  /** None empty; the same objects as in the version an edit came from, except the touched ones. */
  readonly chunks: readonly (readonly T[])[];
  readonly length: number;
  /** Where each chunk starts in the list. */
  readonly #starts: readonly number[];
  readonly #shape: ChunkShape;
  /** The chunk at() last found: a walk by index finds the next item there (not compared). */
  #near = 0;

  private constructor(chunks: readonly (readonly T[])[], shape: ChunkShape) {
    this.chunks = chunks;
    this.#shape = shape;
    const starts = new Array<number>(chunks.length);
    let n = 0;
    for (let k = 0; k < chunks.length; k++) {
      starts[k] = n;
      n += chunks[k]!.length;
    }
    this.#starts = starts;
    this.length = n;
  }

  /** `items` in chunks of `shape.chunk`; its edits keep the shape. */
  static of<T>(items: readonly T[], shape = CHUNKS): ChunkedList<T> {
    const chunks: T[][] = [];
    for (let from = 0; from < items.length; from += shape.chunk)
      chunks.push(items.slice(from, from + shape.chunk));
    return new ChunkedList(chunks, shape);
  }

  /** The shape it was made with. */
  shape(): ChunkShape {
    return this.#shape;
  }

  /** The chunk holding index `i` (0 <= i < length). */
  chunkAt(i: number): number {
    const starts = this.#starts;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (starts[mid]! <= i) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  at(index: number): T | undefined {
    const i = index < 0 ? index + this.length : index;
    if (i < 0 || i >= this.length) return undefined;
    let k = this.#near;
    const start = this.#starts[k]!;
    if (i < start || i >= start + this.chunks[k]!.length) this.#near = k = this.chunkAt(i);
    return this.chunks[k]![i - this.#starts[k]!];
  }

  indexOf(item: T): number {
    for (let k = 0; k < this.chunks.length; k++) {
      const at = this.chunks[k]!.indexOf(item);
      if (at !== -1) return this.#starts[k]! + at;
    }
    return -1;
  }

  includes(item: T): boolean {
    return this.indexOf(item) !== -1;
  }

  some(test: (item: T) => boolean): boolean {
    return this.chunks.some((chunk) => chunk.some(test));
  }

  every(test: (item: T) => boolean): boolean {
    return this.chunks.every((chunk) => chunk.every(test));
  }

  map<U>(each: (item: T, index: number) => U): U[] {
    const out = new Array<U>(this.length);
    this.forEach((item, i) => {
      out[i] = each(item, i);
    });
    return out;
  }

  filter(test: (item: T) => boolean): T[] {
    const out: T[] = [];
    for (const chunk of this.chunks) for (const item of chunk) if (test(item)) out.push(item);
    return out;
  }

  forEach(each: (item: T, index: number) => void): void {
    let i = 0;
    for (const chunk of this.chunks) for (let j = 0; j < chunk.length; j++) each(chunk[j]!, i++);
  }

  *[Symbol.iterator](): Iterator<T> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /**
   * This list with the items at `removed` (ascending indexes) taken out and each of `inserted` put
   * before the item at its `before` index (ascending; the length: at the end), in their order.
   * Copies the chunks these touch.
   */
  spliced(removed: readonly number[], inserted: readonly Insert<T>[]): ChunkedList<T> {
    if (this.length === 0)
      return ChunkedList.of(
        inserted.map((insert) => insert.item),
        this.#shape,
      );
    const touched = new Map<number, { removed: number[]; inserted: Insert<T>[] }>();
    const last = this.chunks.length - 1;
    const edit = (k: number) => {
      const e = touched.get(k) ?? { removed: [], inserted: [] };
      touched.set(k, e);
      return e;
    };
    for (const i of removed) edit(this.chunkAt(i)).removed.push(i);
    for (const insert of inserted)
      edit(insert.before >= this.length ? last : this.chunkAt(insert.before)).inserted.push(insert);
    return this.#withChunks(touched, (k, { removed, inserted }) => {
      const chunk = this.chunks[k]!;
      const start = this.#starts[k]!;
      const out: T[] = [];
      let r = 0;
      let n = 0;
      for (let j = 0; j <= chunk.length; j++) {
        while (n < inserted.length && inserted[n]!.before <= start + j) out.push(inserted[n++]!.item);
        if (j === chunk.length) break;
        if (r < removed.length && removed[r] === start + j) r++;
        else out.push(chunk[j]!);
      }
      for (; n < inserted.length; n++) out.push(inserted[n]!.item);
      return out;
    });
  }

  /**
   * This list cut or grown to `length`, item i being `writes.get(i)` where it has one (every index
   * past this list's length must have one). Copies the chunks the writes and the new end touch.
   */
  patched(writes: ReadonlyMap<number, T>, length: number): ChunkedList<T> {
    const touched = new Map<number, true>();
    const end = Math.min(length, this.length);
    for (const i of writes.keys()) if (i < end) touched.set(this.chunkAt(i), true);
    const lastKept = end === 0 ? -1 : this.chunkAt(end - 1);
    if (lastKept >= 0) touched.set(lastKept, true);
    const tail: T[] = [];
    for (let i = this.length; i < length; i++) {
      const item = writes.get(i);
      if (item === undefined && !writes.has(i)) throw new Error(`chunked list: no item for index ${i}`);
      tail.push(item as T);
    }
    const cut = new Map<number, T[]>();
    for (const k of touched.keys()) {
      const start = this.#starts[k]!;
      const chunk = this.chunks[k]!.slice(0, Math.max(0, end - start));
      for (let j = 0; j < chunk.length; j++) if (writes.has(start + j)) chunk[j] = writes.get(start + j) as T;
      cut.set(k, k === lastKept ? chunk.concat(tail) : chunk);
    }
    const chunks: (readonly T[])[] = [];
    for (let k = 0; k <= lastKept; k++) this.#pushSplit(chunks, cut.get(k) ?? this.chunks[k]!);
    if (lastKept < 0) this.#pushSplit(chunks, tail);
    return new ChunkedList(chunks, this.#shape);
  }

  /** The chunks with each touched one replaced by `edit`'s result (split if long, gone if empty). */
  #withChunks<E>(touched: ReadonlyMap<number, E>, edit: (k: number, e: E) => T[]): ChunkedList<T> {
    const chunks: (readonly T[])[] = [];
    for (let k = 0; k < this.chunks.length; k++) {
      const e = touched.get(k);
      if (e === undefined) chunks.push(this.chunks[k]!);
      else this.#pushSplit(chunks, edit(k, e));
    }
    return new ChunkedList(chunks, this.#shape);
  }

  /** `chunk` onto `chunks`: in parts of about a chunk past twice that, nothing when empty. */
  #pushSplit(chunks: (readonly T[])[], chunk: readonly T[]): void {
    if (chunk.length === 0) return;
    const size = this.#shape.chunk;
    if (chunk.length <= 2 * size) {
      chunks.push(chunk);
      return;
    }
    const parts = Math.ceil(chunk.length / size);
    const part = Math.ceil(chunk.length / parts);
    for (let from = 0; from < chunk.length; from += part) chunks.push(chunk.slice(from, from + part));
  }
}

/** An item to insert before index `before` of a list. */
export interface Insert<T> {
  readonly before: number;
  readonly item: T;
}

/** Which side a paired walk moves on after visiting a pair, or 'stop'. */
export type WalkStep = 'a' | 'b' | 'both' | 'stop';

/**
 * Walks two lists in step, as a merge of two sorted lists does: `visit` gets the items at i of `a`
 * and j of `b` (undefined past an end) and says which side moves on. A chunk the two lists share
 * at the same point of the walk is stepped over whole (its items the same objects: the walk would
 * move both sides on past each), so lists that share all but a few chunks cost a few chunks' walk.
 */
export function walkPaired<T>(
  a: ReadonlyList<T>,
  b: ReadonlyList<T>,
  visit: (x: T | undefined, y: T | undefined, i: number, j: number) => WalkStep,
): void {
  const ca = new Cursor(a);
  const cb = new Cursor(b);
  while (!ca.done() || !cb.done()) {
    if (ca.j === 0 && cb.j === 0 && ca.chunk() === cb.chunk()) {
      ca.skipChunk();
      cb.skipChunk();
      continue;
    }
    const step = visit(ca.item(), cb.item(), ca.index, cb.index);
    if (step === 'stop') return;
    if (step !== 'b') ca.next();
    if (step !== 'a') cb.next();
  }
}

/** Whether the two lists hold the same items (by identity) in the same order. */
export function sameItems<T>(a: ReadonlyList<T>, b: ReadonlyList<T>): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  let same = true;
  walkPaired(a, b, (x, y) => {
    if (x === y) return 'both';
    same = false;
    return 'stop';
  });
  return same;
}

/** A position in a list, chunk by chunk (an array is one chunk). */
class Cursor<T> {
  readonly #chunks: readonly (readonly T[])[];
  /** The chunk, the item in it, and the item in the list. */
  #k = 0;
  j = 0;
  index = 0;

  constructor(list: ReadonlyList<T>) {
    this.#chunks = list instanceof ChunkedList ? list.chunks : [Array.isArray(list) ? list : [...list]];
    this.#settle();
  }

  done(): boolean {
    return this.#k >= this.#chunks.length;
  }

  item(): T | undefined {
    return this.#chunks[this.#k]?.[this.j];
  }

  chunk(): readonly T[] | undefined {
    return this.#chunks[this.#k];
  }

  next(): void {
    if (this.done()) return;
    this.j++;
    this.index++;
    this.#settle();
  }

  skipChunk(): void {
    this.index += (this.#chunks[this.#k]?.length ?? 0) - this.j;
    this.#k++;
    this.j = 0;
    this.#settle();
  }

  /** Past the end of a chunk (or an empty one): the start of the next. */
  #settle(): void {
    while (this.#k < this.#chunks.length && this.j >= this.#chunks[this.#k]!.length) {
      this.#k++;
      this.j = 0;
    }
  }
}

/** `items` as a list: chunked when longer than `shape.chunkedFrom`. */
export function listOf<T>(items: readonly T[], shape = CHUNKS): ReadonlyList<T> {
  return items.length > shape.chunkedFrom ? ChunkedList.of(items, shape) : items;
}

/** A list made of `list`'s items: an array if it is short for its shape. */
function shaped<T>(list: ChunkedList<T>): ReadonlyList<T> {
  return list.length > list.shape().chunkedFrom ? list : [...list];
}

/**
 * `list` cut or grown to `length` under `writes` (ChunkedList.patched): a ChunkedList copies the
 * chunks the writes touch and keeps its shape, an array is copied (chunked when long for `shape`).
 */
export function patchedList<T>(
  list: ReadonlyList<T>,
  writes: ReadonlyMap<number, T>,
  length: number,
  shape = CHUNKS,
): ReadonlyList<T> {
  if (list instanceof ChunkedList) return shaped(list.patched(writes, length));
  const out = (Array.isArray(list) ? (list as readonly T[]) : [...list]).slice(0, length);
  for (const [i, item] of writes) if (i < length) out[i] = item;
  if (out.length < length) throw new Error(`patched list: no item for index ${out.length}`);
  return listOf(out, shape);
}

/**
 * `list` with the items at `removed` taken out and `inserted` put in (ChunkedList.spliced): a
 * ChunkedList copies the chunks they touch and keeps its shape, an array is copied (chunked when
 * long for `shape`).
 */
export function splicedList<T>(
  list: ReadonlyList<T>,
  removed: readonly number[],
  inserted: readonly Insert<T>[],
  shape = CHUNKS,
): ReadonlyList<T> {
  if (list instanceof ChunkedList) return shaped(list.spliced(removed, inserted));
  const out = new Array<T>(list.length - removed.length + inserted.length);
  let n = 0;
  let r = 0;
  let a = 0;
  list.forEach((item, i) => {
    while (a < inserted.length && inserted[a]!.before <= i) out[n++] = inserted[a++]!.item;
    if (r < removed.length && removed[r] === i) r++;
    else out[n++] = item;
  });
  while (a < inserted.length) out[n++] = inserted[a++]!.item;
  return listOf(out, shape);
}
