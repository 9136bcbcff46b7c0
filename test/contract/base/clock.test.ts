import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../../contract/base/clock.ts';

test('a timer longer than setTimeout allows (syncPeriod 1000h) does not fire at once', async () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.name);
  process.on('warning', onWarning);
  let fired = false;
  const timer = systemClock.setTimer(1000 * 3600 * 1000, () => {
    fired = true;
  });
  // Node turns an overflowing delay into 1 ms (with a TimeoutOverflowWarning).
  await sleep(30);
  timer.cancel();
  process.off('warning', onWarning);
  assert.equal(fired, false);
  assert.deepEqual(warnings, []);
});
