import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import v8 from 'node:v8';
import { HEAP_GROWTH_WORTH_RELEASING, heapReleaser } from '../../src/daemon/release-memory.ts';

const committed = () => v8.getHeapStatistics().total_heap_size;

test('the releaser collects unreachable objects at once, without --expose-gc', async () => {
  const release = heapReleaser(0);
  const ref = (() => new WeakRef({ payload: new Array(1000).fill(1) }))();
  // A WeakRef's target stays alive until the job that made it ends.
  await nextTurn();
  assert.equal(release(), true);
  assert.equal(ref.deref(), undefined);
});

test('the releaser gives a peak back once the heap grew by what it is worth, and skips otherwise', async () => {
  const release = heapReleaser();
  assert.equal(release(), false, 'nothing grew: no last-resort collection');

  // A transient peak twice the threshold (1 MiB arrays of doubles), then dropped.
  let peak: number[][] | undefined = Array.from({ length: (2 * HEAP_GROWTH_WORTH_RELEASING) / 2 ** 20 }, () =>
    new Array(2 ** 17).fill(0.5),
  );
  const atPeak = committed();
  assert.equal(peak.length, 64);
  peak = undefined;
  await nextTurn();

  assert.equal(release(), true);
  assert.ok(
    committed() <= atPeak - HEAP_GROWTH_WORTH_RELEASING,
    `the peak's pages are given back: ${committed()} bytes committed, ${atPeak} at the peak`,
  );
  assert.equal(release(), false, 'nothing grew since: no second collection');
});
