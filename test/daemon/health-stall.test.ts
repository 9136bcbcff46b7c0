// A real daemon whose main thread stops running (blocked outright, as in a long collection or on a
// machine that does not schedule it): /healthz is still answered meanwhile, by the listener's
// thread; once the main thread has been silent past the heartbeat bound (health-heartbeat.ts:
// kube-proxy's health timeout, 2 × syncPeriod, plus one beat) it answers 503, and 200 again once
// the main thread runs; the stall is logged, and /metrics counts every answer by its code.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allowance } from '../../harness/emulation.ts';
import { stalledAfterMs } from '../../src/daemon/health-heartbeat.ts';
import { eventually, FAST_CONFIG } from './daemon-harness.ts';
import { probeWhileBlocked } from './healthz-prober.ts';
import { startRecordingDaemon } from './recording-daemon.ts';

/** After the bound, long enough for the prober's thread to be answered at least once on a busy machine. */
const PAST_THE_BOUND_MS = allowance(2_000);
/**
 * A health timeout of 4 s (syncPeriod 2 s, as health-idle.test.ts): FAST_CONFIG's 1 s is within
 * the scheduling gaps a loaded 2-core machine gives the test's process by itself (load 25-30).
 */
const STALL_CONFIG = FAST_CONFIG.replace('syncPeriod: 500ms', 'syncPeriod: 2s');

test('a blocked main thread: /healthz answered meanwhile, 503 past the heartbeat bound, 200 after', async (t) => {
  const { config, dataplane, daemon, lines } = await startRecordingDaemon(t, { configYaml: STALL_CONFIG });
  assert.equal(config.syncPeriodMs, 2_000);
  const bound = stalledAfterMs(2 * config.syncPeriodMs);
  await eventually('first sync', () => dataplane.syncs.length > 0);

  const url = `${daemon.healthzUrl}/healthz`;
  const { blockedAtMs, resumedAtMs, answers } = await probeWhileBlocked(url, bound + PAST_THE_BOUND_MS);
  const whileBlocked = answers.filter((a) => a.receivedMs < resumedAtMs && a.sentMs >= blockedAtMs);
  assert.ok(whileBlocked.length > 0, 'answered while the main thread was blocked');
  // The last beat came before the block: what was sent a bound after it started was judged stalled.
  const pastBound = whileBlocked.filter((a) => a.sentMs >= blockedAtMs + bound);
  assert.ok(pastBound.length > 0, `no answer ${bound} ms into the block (${whileBlocked.length} during it)`);
  assert.deepEqual(new Set(pastBound.map((a) => a.status)), new Set([503]));

  const seen = answers.map((a) => a.status);
  await eventually('200 again', async () => {
    const status = (await fetch(url)).status;
    seen.push(status);
    return status === 200;
  });
  // The block is said, as a warning (a loaded machine may add a stall of its own).
  const stalls = lines.filter((l) => String(l.msg).startsWith('the main thread did not run'));
  assert.ok(
    stalls.some((l) => l.level === 40 && Number(l.silentMs) >= bound),
    JSON.stringify(stalls),
  );

  // Every answer the thread gave is in the metrics, by code.
  const text = await (await fetch(`${daemon.metricsUrl}/metrics`)).text();
  for (const code of [200, 503]) {
    const counted = new RegExp(`^kubeproxy_proxy_healthz_total\\{code="${code}"\\} (\\d+)$`, 'm').exec(
      text,
    )?.[1];
    assert.equal(Number(counted), seen.filter((s) => s === code).length, `code ${code}`);
  }
});
