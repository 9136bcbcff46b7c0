import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { lastResortCollector } from '../../src/daemon/release-memory.ts';

test('the last-resort collector collects unreachable objects at once, without --expose-gc', async () => {
  const collect = lastResortCollector();
  const ref = (() => new WeakRef({ payload: new Array(1000).fill(1) }))();
  // A WeakRef's target stays alive until the job that made it ends.
  await nextTurn();
  collect();
  assert.equal(ref.deref(), undefined);
});
