// Issue 27's "done when": an idle daemon against a 1.29-, a 1.32- and a newest-shaped API server
// keeps /healthz and /livez 200 for 10 minutes, with kproxy's default sync period (the health
// timeout is 2 × 30 s); a real outage then turns them 503 after the timeout, not before, and they
// come back when the server does. Three daemons at once, one per minor, each against its own
// stand-in server; nothing changes in the clusters. The servers send a bookmark a minute, as
// kube-apiserver's watch cache does (defaultBookmarkFrequency, apiserver/pkg/storage/cacher/cacher.go),
// so the daemons hear from them no more often than from a real one.
// ~12 minutes, nearly all of it waiting: scripts/test.sh runs it in the lane beside the rest.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../contract/base/clock.ts';
import { type Minor, NEWEST_MINOR } from '../../harness/apiserver/profiles.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { allowance } from '../../harness/emulation.ts';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.ts';
import { BACKOFF_MAX_MS } from '../../src/kube/backoff.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { capturedLogger } from '../support/captured-logger.ts';
import { configFromYaml, eventually, RecordingDataplane } from './daemon-harness.ts';

const MINORS_UNDER_TEST: readonly Minor[] = ['1.29', '1.32', NEWEST_MINOR];
const IDLE_MS = 10 * 60_000;
/** kube-proxy's default syncPeriod (30 s) and its health timeout, 2 × syncPeriod. */
const HEALTH_TIMEOUT_MS = 2 * 30_000;
const IDLE_POLL_MS = 3_000;
const OUTAGE_POLL_MS = 1_000;
/**
 * How late after stop + timeout the first 503 may be seen: contact is lost at the first failed
 * call after the stop, which is the cut watch itself or the informer's first retry (its initial
 * backoff, 800 ms with up to +100% jitter: 1.6 s); then one poll; and 5 s for three daemons'
 * event loops and the test's own on a loaded 2-core machine.
 */
const LATE_503_MS = 1_600 + OUTAGE_POLL_MS + allowance(5_000);
/** After the server is back, every informer retries within the capped backoff, then relists. */
const RECOVERY_MS = BACKOFF_MAX_MS + allowance(15_000);

const CONFIG = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-1
healthzBindAddress: 127.0.0.1:0
metricsBindAddress: 127.0.0.1:0
`;

interface Run {
  readonly minor: Minor;
  readonly api: StandInApiServer;
  readonly daemon: Daemon;
  readonly dataplane: RecordingDataplane;
}

async function start(t: { after(fn: () => Promise<unknown>): void }, minor: Minor): Promise<Run> {
  const api = await startApiServer({ version: minor, bookmarkIntervalMs: 60_000 });
  t.after(() => api.stop());
  api.state.apply(SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
  api.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('default', 'web-abc', { service: 'web' }));
  api.state.apply(NODES, sampleNode('node-1'));
  const client = new KubeClient({ server: api.url });
  t.after(() => client.close());
  const config = await configFromYaml(CONFIG);
  assert.equal(2 * config.syncPeriodMs, HEALTH_TIMEOUT_MS, "kproxy's default sync period");
  const dataplane = new RecordingDataplane();
  const started = await startDaemon({
    config,
    logger: capturedLogger().logger,
    api: client,
    dataplane,
    clock: systemClock,
    healthCheckHost: '127.0.0.1',
    metrics: new ProxyMetrics('nftables', { processMetrics: false }),
  });
  assert.ok(started.ok, started.ok ? '' : started.error);
  t.after(() => started.daemon.stop());
  return { minor, api, daemon: started.daemon, dataplane };
}

const PATHS = ['/healthz', '/livez'] as const;

async function statuses(run: Run): Promise<{ path: string; status: number; at: number }[]> {
  return Promise.all(
    PATHS.map(async (path) => {
      const status = (await fetch(`${run.daemon.healthzUrl}${path}`)).status;
      return { path, status, at: Date.now() };
    }),
  );
}

describe('an idle daemon against a 1.29-, a 1.32- and a newest-shaped API server', () => {
  test('/healthz and /livez stay 200 for 10 minutes; an outage turns them 503 after the timeout, not before; they come back', {
    timeout: IDLE_MS + 10 * 60_000,
  }, async (t) => {
    const runs = await Promise.all(MINORS_UNDER_TEST.map((minor) => start(t, minor)));
    for (const run of runs)
      await eventually(`${run.minor}: first sync`, () => run.dataplane.syncs.length > 0);

    const began = Date.now();
    // Per minor and path: the first answer that was not 200, and how many of the probes were not.
    const idleFailures = new Map<string, { first: string; count: number }>();
    let probes = 0;
    while (Date.now() - began < IDLE_MS) {
      probes++;
      for (const run of runs)
        for (const s of await statuses(run)) {
          if (s.status === 200) continue;
          const key = `${run.minor} ${s.path}`;
          const seen = idleFailures.get(key) ?? {
            first: `${s.status} at ${((s.at - began) / 1000).toFixed(0)} s`,
            count: 0,
          };
          idleFailures.set(key, { ...seen, count: seen.count + 1 });
        }
      await sleep(IDLE_POLL_MS);
    }
    for (const run of runs) {
      await t.test(`${run.minor}: 200 throughout 10 idle minutes`, () => {
        const failed = PATHS.flatMap((path) => {
          const f = idleFailures.get(`${run.minor} ${path}`);
          return f ? [`${path}: ${f.first} first, ${f.count} of ${probes} probes not 200`] : [];
        });
        assert.deepEqual(failed, []);
        assert.ok(
          run.api.requests.some((r) => r.path.endsWith('/servicecidrs')),
          'the daemon looked for ServiceCIDRs (404 before 1.33)',
        );
      });
    }

    const stoppedAt = Date.now();
    await Promise.all(runs.map((run) => run.api.stop()));
    const first503 = new Map<string, number>();
    const early: string[] = [];
    while (
      Date.now() - stoppedAt < HEALTH_TIMEOUT_MS + LATE_503_MS &&
      first503.size < runs.length * PATHS.length
    ) {
      for (const run of runs)
        for (const s of await statuses(run)) {
          const key = `${run.minor} ${s.path}`;
          if (s.status === 503 && !first503.has(key)) {
            first503.set(key, s.at - stoppedAt);
            if (s.at - stoppedAt <= HEALTH_TIMEOUT_MS)
              early.push(`${key}: 503 ${s.at - stoppedAt} ms after the stop`);
          } else if (s.status !== 503) {
            assert.equal(s.status, 200, key);
          }
        }
      await sleep(OUTAGE_POLL_MS);
    }
    for (const run of runs) {
      await t.test(`${run.minor}: 503 after the ${HEALTH_TIMEOUT_MS / 1000} s timeout, not before`, () => {
        assert.deepEqual(
          early.filter((e) => e.startsWith(`${run.minor} `)),
          [],
        );
        for (const path of PATHS)
          assert.ok(
            first503.has(`${run.minor} ${path}`),
            `${path} still 200 ${HEALTH_TIMEOUT_MS + LATE_503_MS} ms into the outage`,
          );
      });
    }

    await Promise.all(runs.map((run) => run.api.restartAs(run.minor)));
    await Promise.all(
      runs.map((run) =>
        eventually(
          `${run.minor}: /healthz and /livez 200 once the server is back`,
          async () => (await statuses(run)).every((s) => s.status === 200),
          RECOVERY_MS,
        ),
      ),
    );
  });
});
