import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAll, runInSlices, type Steps, sortSteps } from '../../../contract/base/work-slices.ts';

function* counting(steps: number, log: string[]): Steps<number> {
  for (let i = 0; i < steps; i++) {
    log.push(`step ${i}`);
    yield;
  }
  return steps;
}

describe('work in slices', () => {
  it('runAll runs every step at once and returns the result', () => {
    const log: string[] = [];
    assert.equal(runAll(counting(3, log)), 3);
    assert.deepEqual(log, ['step 0', 'step 1', 'step 2']);
  });

  it('runInSlices lets the event loop run between slices, and returns the same result', async () => {
    const log: string[] = [];
    // Other work waiting for the event loop: a callback queued before the computation starts.
    setImmediate(() => log.push('turn'));
    // A slice of 0 ms is over after every step: the other work runs before the second step.
    assert.equal(await runInSlices(counting(3, log), 0), 3);
    assert.deepEqual(log, ['step 0', 'turn', 'step 1', 'step 2']);
  });

  it('sortSteps sorts as Array.prototype.sort does, stable, in steps, at every size around its runs', () => {
    // Sizes at the edges of its runs of 4,096 and of the merge passes; keys with many ties, so that
    // an unstable merge shows in the original positions.
    for (const size of [0, 1, 2, 4095, 4096, 4097, 8192, 8193, 3 * 4096 + 5, 40_000]) {
      const items = Array.from({ length: size }, (_, at) => ({ key: (at * 7919) % 53, at }));
      const byKey = (a: { key: number }, b: { key: number }) => a.key - b.key;
      const steps = sortSteps(items, byKey);
      let paused = 0;
      let next = steps.next();
      for (; !next.done; next = steps.next()) paused++;
      assert.deepEqual(next.value, [...items].sort(byKey), `${size} items`);
      // At least a pause per run sorted, and more while merging.
      assert.ok(paused >= Math.ceil(size / 4096), `${size} items: ${paused} pauses`);
      if (size > 2 * 4096) assert.ok(paused > Math.ceil(size / 4096) + 1, `${size} items: merged in steps`);
    }
  });
});
