import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAll, runInSlices, type Steps } from '../../../contract/base/work-slices.ts';

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
});
