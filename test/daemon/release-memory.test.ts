import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { promisify } from 'node:util';
import v8 from 'node:v8';
import type { SyncKind } from '../../contract/dataplane.ts';
import {
  BETWEEN_FULL_SYNCS_HEAP_GROWING_PERCENT,
  FULL_SYNC_HEAP_GROWING_PERCENT,
  HEAP_GROWTH_WORTH_RELEASING,
  HeapGrowth,
  heapReleaser,
} from '../../src/daemon/release-memory.ts';

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

/**
 * How much the committed heap grows, in MiB, in a process that keeps ~15 MiB of small objects and
 * makes ~100 MiB of garbage that outlives two scavenges (runs of 20k objects, as a cold-start
 * piece's elements), with the daemon's young generation and its cap on the old generation's growth.
 */
async function churnGrowthMiB(): Promise<number> {
  const module = new URL('../../src/daemon/release-memory.ts', import.meta.url).href;
  const script = `
    import v8 from 'node:v8';
    import { FULL_SYNC_HEAP_GROWING_PERCENT, setHeapGrowth } from '${module}';
    setHeapGrowth(FULL_SYNC_HEAP_GROWING_PERCENT);
    const live = Array.from({ length: 200000 }, (_, i) => ({ i, key: 'k' + i }));
    const base = v8.getHeapStatistics().total_heap_size;
    let peak = base;
    let run = [];
    for (let i = 0; i < 2000000; i++) {
      run.push({ i, text: 'x' + i });
      if (run.length === 20000) {
        run = [];
        peak = Math.max(peak, v8.getHeapStatistics().total_heap_size);
      }
    }
    console.log(live.length && (peak - base) / 2 ** 20);`;
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--max-semi-space-size=4',
    '--input-type=module',
    '-e',
    script,
  ]);
  return Number(stdout);
}

test('with the growth cap, garbage that outlives the young generation does not pile up in the old one', async () => {
  // 16-19 MiB with the cap; 76-81 MiB with V8's own growth (measured, Node 24).
  const growth = await churnGrowthMiB();
  assert.ok(growth < 40, `the committed heap grew by ${growth.toFixed(1)} MiB`);
});

test('the heap growth is capped from the start and for every full sync, and lifted only after the latest', async () => {
  const set: number[] = [];
  const growth = new HeapGrowth((percent) => set.push(percent));
  const synced: SyncKind[] = [];
  const syncer = growth.capping({
    sync: async (kind) => {
      synced.push(kind);
      return { kind, objectCount: 0, conntrack: [] };
    },
    intact: async () => true,
  });
  const capped = FULL_SYNC_HEAP_GROWING_PERCENT;
  const lifted = BETWEEN_FULL_SYNCS_HEAP_GROWING_PERCENT;
  assert.deepEqual(set, [capped], 'capped before anything: the first sync is full');

  await syncer.sync('full');
  const afterFirst = growth.lifter();
  afterFirst();
  assert.deepEqual(set, [capped, capped, lifted], 'lifted once the full sync is released');

  await syncer.sync('incremental');
  assert.deepEqual(set, [capped, capped, lifted], 'an incremental sync leaves it');

  await syncer.sync('full');
  const afterSecond = growth.lifter();
  await syncer.sync('full');
  afterSecond();
  assert.deepEqual(set, [capped, capped, lifted, capped, capped], 'a full sync began since: still capped');
  growth.lifter()();
  assert.deepEqual(set.at(-1), lifted);
  assert.deepEqual(synced, ['full', 'incremental', 'full', 'full'], 'every sync is passed on');
  assert.equal(await syncer.intact(), true);
});
