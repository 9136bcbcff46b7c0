// The daemon end to end on the real clock, against a stand-in API server shaped like one before
// Kubernetes 1.33 (servicecidrs answered 404) or with RBAC from before it (403): idle for three health timeouts with /healthz and
// /livez probed throughout, all 200; then the server stops: 503 comes on each, never before one
// timeout after the stop; then it is back: 200 again. Waits derive from the configured syncPeriod (the
// timeout is 2 × syncPeriod); what must come is awaited under eventually's bound, what must not
// come is checked against when each probe was answered, which needs no allowance: an answer
// received before a moment was decided before it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiServerOptions } from '../../harness/apiserver/server.ts';
import { allowance } from '../../harness/emulation.ts';
import { eventually, FAST_CONFIG } from './daemon-harness.ts';
import { startRecordingDaemon } from './recording-daemon.ts';

const PROBE_EVERY_MS = 50;
/**
 * The health timeout is 2 × syncPeriod: 4 s here. A scheduling gap of the daemon's process longer
 * than the timeout would read as an outage; the test's own process hosts the daemon, so on a busy
 * 2-core machine (CI runs other labs beside it, load 15-25 seen) 1 s (FAST_CONFIG's) was not enough
 * headroom: the event loop's turns are bounded at tens of ms (docs/architecture.md), not the OS's.
 */
const IDLE_CONFIG = FAST_CONFIG.replace('syncPeriod: 500ms', 'syncPeriod: 2s');
/**
 * eventually's own bound (daemon-harness.ts), for the 503 to come after the stop: one informer
 * retry (at most 100 ms here) to notice it, then the timeout; seconds even on a loaded machine.
 */
const OUTAGE_BOUND_MS = allowance(15_000);

async function idleRun(
  t: { after(fn: () => Promise<unknown>): void },
  apiOptions: ApiServerOptions,
  saidOnce: RegExp,
) {
  const { api, config, dataplane, daemon, lines } = await startRecordingDaemon(t, {
    apiOptions,
    configYaml: IDLE_CONFIG,
  });
  assert.equal(config.syncPeriodMs, 2000);
  const timeoutMs = 2 * config.syncPeriodMs;
  const codes = async () =>
    [
      (await fetch(`${daemon.healthzUrl}/healthz`)).status,
      (await fetch(`${daemon.healthzUrl}/livez`)).status,
    ].join();
  const unhealthy = async () => {
    const text = await (await fetch(`${daemon.metricsUrl}/metrics`)).text();
    return [...text.matchAll(/^kproxy_proxy_unhealthy\{cause="([^"]+)"\} 1$/gm)].map((m) => m[1]);
  };
  await eventually('first sync', () => dataplane.syncs.length > 0);

  // Idle: nothing changes in the cluster for three timeouts, while the optional resource is
  // refused at every retry (the informer's backoff here is at most 100 ms).
  const asked = () => api.requests.filter((q) => q.path.endsWith('/servicecidrs')).length;
  const askedBefore = asked();
  const idleEnd = Date.now() + 3 * timeoutMs;
  while (Date.now() < idleEnd) {
    assert.equal(await codes(), '200,200');
    await sleep(PROBE_EVERY_MS);
  }
  assert.ok(asked() - askedBefore >= 3, `servicecidrs asked ${asked() - askedBefore} times while idle`);
  assert.deepEqual(await unhealthy(), []);
  const said = lines.filter((l) => saidOnce.test(String(l.msg)));
  assert.equal(said.length, 1, 'the refusal is said once, not at every retry');
  assert.ok(!lines.some((l) => l.cause !== undefined), 'no health cause while idle');

  // The server goes away: each endpoint turns 503 once the contact has been lost for a whole
  // timeout, not sooner, and stays 503. The two are asked one after the other, so the timeout may
  // pass between the two answers of one probe (on a loaded machine, often): each endpoint is
  // judged on its own answers.
  const stoppedAt = Date.now();
  await api.stop();
  const turned = new Set<string>();
  while (turned.size < 2) {
    for (const path of ['/healthz', '/livez']) {
      const code = (await fetch(`${daemon.healthzUrl}${path}`)).status;
      const sinceStop = Date.now() - stoppedAt;
      if (turned.has(path)) assert.equal(code, 503, `${path} ${code} again during the outage`);
      else if (code === 503) {
        assert.ok(sinceStop >= timeoutMs, `${path} 503 ${sinceStop} ms after the stop`);
        turned.add(path);
      } else {
        assert.equal(code, 200);
        assert.ok(sinceStop < OUTAGE_BOUND_MS, `${path}: no 503 within the bound`);
      }
    }
    await sleep(PROBE_EVERY_MS);
  }
  assert.deepEqual(await unhealthy(), ['api-server']);
  const outage = lines.filter((l) => l.cause === 'api-server').map((l) => String(l.msg));
  assert.equal(outage.length, 1);
  assert.match(
    outage[0] ?? '',
    /^\/healthz and \/livez answer 503: the API server has not been followed since /,
  );

  // Back: 200 again, and the cause is said to have gone.
  await api.start();
  await eventually('200 again', async () => (await codes()) === '200,200');
  assert.deepEqual(await unhealthy(), []);
  assert.equal(lines.filter((l) => l.cause === 'api-server').length, 2);
  return lines;
}

describe('an idle daemon keeps 200 past the health timeout; an outage still turns it 503', () => {
  test('against a server that does not serve ServiceCIDRs (404, before 1.33)', async (t) => {
    await idleRun(t, { unserved: ['servicecidrs'] }, /does not serve this resource/);
  });

  test('against RBAC that does not grant ServiceCIDRs (403, a role from before 1.33)', async (t) => {
    const lines = await idleRun(t, { forbidden: ['servicecidrs'] }, /forbids kproxy to read/);
    const said = lines.find((l) => /forbids kproxy to read/.test(String(l.msg)));
    assert.equal(said?.level, 40, 'a warning: the operator can fix it');
    assert.equal(said?.resource, 'servicecidrs');
    assert.match(
      String(said?.msg),
      /networking\.k8s\.io\/v1 servicecidrs \(403\): taken as empty.*meanwhile the service CIDRs come from --service-cluster-ip-range.*add \{apiGroups: \["networking\.k8s\.io"\], resources: \["servicecidrs"\], verbs: \["list", "watch"\]\} to the ClusterRole/,
    );
  });
});
