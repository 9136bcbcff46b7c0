// ChunkedList (contract/chunked-list.ts): after any sequence of edits a list holds what the same
// edits of an array hold, shares the chunks the edits did not touch, and a paired walk of two
// versions visits what a walk of their arrays would. Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/contract/chunked-list.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ChunkedList,
  type Insert,
  patchedList,
  type ReadonlyList,
  sameItems,
  splicedList,
  walkPaired,
} from '../../contract/chunked-list.ts';
import { prng } from '../support/prng.ts';
import { testSeeds } from '../support/seeds.ts';

const SHAPE = { chunkedFrom: 6, chunk: 3 };

/** Indexes of `length` each kept with probability `p`, ascending. */
function someOf(random: () => number, length: number, p: number): number[] {
  return Array.from({ length }, (_, i) => i).filter(() => random() < p);
}

/** Items as objects, compared by identity as the lists' users compare endpoints. */
const item = (n: number) => ({ n });
type Item = ReturnType<typeof item>;

test('random edits: the items of the same edits of an array, the untouched chunks shared', () => {
  for (const seed of testSeeds({ first: 1, count: 50 })) {
    const random = prng(seed);
    let array: Item[] = Array.from({ length: Math.floor(random() * 40) }, (_, n) => item(n));
    let list: ReadonlyList<Item> = ChunkedList.of(array, SHAPE);
    for (let step = 0; step < 60; step++) {
      const where = `seed ${seed}, step ${step}`;
      const before = list;
      let next: Item[];
      /** Items removed, inserted or written, and added or cut at the end. */
      let edits: number;
      if (random() < 0.5) {
        // Removals and insertions, as a merge of slices makes them.
        const removed = someOf(random, array.length, random() * 0.2);
        const inserted: Insert<Item>[] = someOf(random, array.length + 1, random() * 0.2).map((before) => ({
          before,
          item: item(1000 + before),
        }));
        next = [];
        let a = 0;
        array.forEach((x, i) => {
          while (a < inserted.length && inserted[a]!.before <= i) next.push(inserted[a++]!.item);
          if (!removed.includes(i)) next.push(x);
        });
        while (a < inserted.length) next.push(inserted[a++]!.item);
        list = splicedList(list, removed, inserted, SHAPE);
        edits = removed.length + inserted.length;
      } else {
        // Writes and a new length, as slots are reassigned.
        const length = Math.max(0, array.length + Math.floor(random() * 7) - 3);
        const writes = new Map<number, Item>();
        for (const i of someOf(random, length, 0.1)) writes.set(i, item(2000 + i));
        for (let i = array.length; i < length; i++) writes.set(i, item(3000 + i));
        next = Array.from({ length }, (_, i) => writes.get(i) ?? array[i]!);
        list = patchedList(list, writes, length, SHAPE);
        edits = writes.size + Math.abs(length - array.length);
      }
      assert.deepEqual([...list], next, where);
      assert.equal(list.length, next.length, where);
      for (const [i, x] of next.entries()) assert.equal(list.at(i), x, `${where}: at(${i})`);
      assert.equal(list instanceof ChunkedList, next.length > SHAPE.chunkedFrom, `${where}: chunked`);
      if (list instanceof ChunkedList) {
        assert.ok(
          list.chunks.every((chunk) => chunk.length > 0 && chunk.length <= 2 * SHAPE.chunk),
          `${where}: chunk sizes`,
        );
        // An edit copies the chunks it touches (split when grown), and shares the others.
        if (before instanceof ChunkedList) {
          const had = new Set<unknown>(before.chunks);
          const copied = list.chunks.filter((chunk) => !had.has(chunk)).length;
          assert.ok(copied <= 3 * edits + 2, `${where}: ${copied} chunks copied for ${edits} edits`);
        }
      }
      // A paired walk (a merge by identity) meets every pair a walk of the arrays meets, in order,
      // except those of a chunk shared at the same point.
      assert.equal(sameItems(before, list), sameArrays(array, next), `${where}: sameItems`);
      const walked: [number, number][] = [];
      walkPaired(before, list, (x, y, i, j) => {
        assert.equal(x, array[i], `${where}: item ${i} of before`);
        assert.equal(y, next[j], `${where}: item ${j} of next`);
        if (x !== y) walked.push([i, j]);
        return x === y ? 'both' : x === undefined ? 'b' : y === undefined ? 'a' : x.n < y.n ? 'a' : 'b';
      });
      assert.deepEqual(walked, arrayWalk(array, next), `${where}: the walk's differences`);
      array = next;
    }
  }
});

function sameArrays(a: readonly Item[], b: readonly Item[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The pairs that differ in a plain walk of two arrays by the same rule. */
function arrayWalk(a: readonly Item[], b: readonly Item[]): [number, number][] {
  const out: [number, number][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (x === y) {
      i++;
      j++;
      continue;
    }
    out.push([i, j]);
    if (x === undefined) j++;
    else if (y === undefined) i++;
    else if (x.n < y.n) i++;
    else j++;
  }
  return out;
}
