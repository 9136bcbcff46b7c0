import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nodeLeaving, ProxyHealth } from '../../src/daemon/health.ts';
import { healthAnswer } from '../../src/daemon/health-answer.ts';
import { registerHealthMetrics } from '../../src/daemon/health-metrics.ts';
import { listenHttp, parseHostPort } from '../../src/daemon/http-listener.ts';
import { metricsHandler } from '../../src/daemon/metrics-handler.ts';
import type { Node } from '../../src/kube/objects.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { FakeClock } from '../sync/fake-clock.ts';

const TIMEOUT = 60_000;

function node(extra: { deletionTimestamp?: string; taints?: { key: string; effect: string }[] } = {}): Node {
  return {
    kind: 'Node',
    metadata: {
      name: 'node-1',
      ...(extra.deletionTimestamp ? { deletionTimestamp: extra.deletionTimestamp } : {}),
    },
    spec: { taints: extra.taints ?? [] },
  };
}

const synced = {
  type: 'synced',
  requested: 'full',
  reason: 'start',
  outcome: { kind: 'full', objectCount: 1, conntrack: [] },
  startedAt: 0,
  durationMs: 1,
} as const;

/** A health on a fake clock, with the reports it made as "cause failing|cleared". */
function observed(timeout = TIMEOUT) {
  const clock = new FakeClock();
  const reports: string[] = [];
  const health = new ProxyHealth(clock, timeout, (r) =>
    reports.push(`${r.cause} ${r.failing ? 'failing' : 'cleared'}`),
  );
  const codes = () => {
    const judged = [health.healthz().healthy, health.live().healthy];
    // What the health listener's thread answers from must say the same at every step.
    const published = health.shared.read();
    assert.deepEqual([published.live && published.nodeEligible, published.live], judged, 'published');
    assert.equal(published.nodeEligible, health.healthz().nodeEligible, 'published nodeEligible');
    return judged;
  };
  return { clock, health, reports, codes };
}

const failedSync = {
  type: 'failed',
  requested: 'full',
  reason: 'retry',
  error: new Error('nft: Operation not permitted'),
  startedAt: 0,
  durationMs: 1,
  retryInMs: 1000,
} as const;

const lost = (at: number) =>
  ({ type: 'lost', at, resource: 'services', error: 'network: ECONNREFUSED' }) as const;

describe('ProxyHealth: each cause of a 503 both ways, at the exact timeout', async () => {
  test('a queued change never synced: 200 until the timeout, 503 from it, 200 once synced', async () => {
    const { clock, health, reports, codes } = observed();
    assert.deepEqual(codes(), [true, true], 'nothing queued yet');
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT - 1);
    assert.deepEqual(codes(), [true, true]);
    assert.deepEqual(reports, []);
    await clock.advance(1);
    assert.deepEqual(codes(), [false, false]);
    assert.deepEqual(health.failing(), [
      {
        cause: 'unsynced',
        since: clock.now() - TIMEOUT,
        detail: `a queued change has not been synced since ${new Date(clock.now() - TIMEOUT).toISOString()}`,
      },
    ]);
    health.observe(synced);
    assert.deepEqual(codes(), [true, true]);
    assert.equal(health.healthz().lastUpdated, clock.now());
    assert.deepEqual(reports, ['unsynced failing', 'unsynced cleared']);
  });

  test('syncs that keep failing: the oldest change counts, later ones do not reset its age', async () => {
    const { clock, health, reports, codes } = observed();
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT / 2);
    health.observe(failedSync);
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT / 2 - 1);
    assert.deepEqual(codes(), [true, true]);
    await clock.advance(1);
    assert.deepEqual(codes(), [false, false]);
    await clock.advance(10 * TIMEOUT);
    health.observe(failedSync);
    assert.deepEqual(reports, ['unsynced failing'], 'said once, not at every failed retry');
    health.observe(synced);
    assert.deepEqual(codes(), [true, true]);
  });

  test('a change synced in time is no news: no report, never 503', async () => {
    const { clock, health, reports, codes } = observed();
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT - 1);
    health.observe(synced);
    await clock.advance(2 * TIMEOUT);
    assert.deepEqual(codes(), [true, true]);
    assert.deepEqual(reports, []);
  });

  test('the API server not followed: 200 until the timeout, 503 from it, 200 once followed', async () => {
    const { clock, health, reports, codes } = observed();
    health.apiContact(lost(clock.now()));
    await clock.advance(TIMEOUT - 1);
    assert.deepEqual(codes(), [true, true]);
    await clock.advance(1);
    assert.deepEqual(codes(), [false, false]);
    assert.match(
      health.failing()[0]?.detail ?? '',
      /^the API server has not been followed since .* \(services: network: ECONNREFUSED\)$/,
    );
    health.apiContact({ type: 'regained', at: clock.now() });
    assert.deepEqual(codes(), [true, true]);
    assert.deepEqual(reports, ['api-server failing', 'api-server cleared']);
  });

  test('contact regained before the timeout is no news; a new loss counts from its own start', async () => {
    const { clock, health, reports, codes } = observed();
    health.apiContact(lost(clock.now()));
    await clock.advance(TIMEOUT - 1);
    health.apiContact({ type: 'regained', at: clock.now() });
    health.apiContact(lost(clock.now()));
    await clock.advance(TIMEOUT - 1);
    assert.deepEqual(codes(), [true, true]);
    assert.deepEqual(reports, []);
    await clock.advance(1);
    assert.deepEqual(codes(), [false, false]);
  });

  test('a node being deleted or tainted for scale-down fails /healthz at once, never /livez', async () => {
    const { clock, health, reports, codes } = observed();
    health.nodeChanged(node());
    assert.deepEqual(codes(), [true, true]);
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    assert.deepEqual(codes(), [false, true]);
    await clock.advance(10 * TIMEOUT);
    assert.deepEqual(codes(), [false, true]);
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    assert.deepEqual(reports, ['node failing'], 'the same cause again is no news');
    health.nodeChanged(node());
    assert.deepEqual(codes(), [true, true]);
    health.nodeChanged(node({ taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] }));
    assert.deepEqual([...codes(), health.healthz().nodeEligible], [false, true, false]);
    assert.equal(health.failing()[0]?.detail, 'node node-1 is tainted ToBeDeletedByClusterAutoscaler');
    health.nodeChanged(node({ taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] }));
    assert.deepEqual(codes(), [true, true]);
    assert.deepEqual(reports, ['node failing', 'node cleared', 'node failing', 'node cleared']);
  });

  test('causes are independent: one clearing leaves the other', async () => {
    const { clock, health, codes } = observed();
    health.observe({ type: 'queued', at: clock.now() });
    health.apiContact(lost(clock.now()));
    await clock.advance(TIMEOUT);
    health.observe(synced);
    assert.deepEqual(codes(), [false, false], 'still not following the API server');
    health.apiContact({ type: 'regained', at: clock.now() });
    assert.deepEqual(codes(), [true, true]);
  });

  test('nodeLeaving: an unknown node (not yet seen) is not leaving', () => {
    assert.equal(nodeLeaving(undefined), undefined);
    assert.equal(nodeLeaving(node()), undefined);
  });

  test('kproxy_proxy_unhealthy says which cause holds, read at the scrape', async () => {
    const { clock, health } = observed();
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    registerHealthMetrics(metrics.registry, health);
    const gauge = async () =>
      [...(await metrics.registry.metrics()).matchAll(/^kproxy_proxy_unhealthy\{cause="([^"]+)"\} (\d)$/gm)]
        .map((m) => `${m[1]}=${m[2]}`)
        .join(' ');
    assert.equal(await gauge(), 'unsynced=0 api-server=0 node=0');
    health.apiContact(lost(clock.now()));
    await clock.advance(TIMEOUT - 1);
    assert.equal(await gauge(), 'unsynced=0 api-server=0 node=0');
    await clock.advance(1);
    assert.equal(await gauge(), 'unsynced=0 api-server=1 node=0');
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    assert.equal(await gauge(), 'unsynced=0 api-server=1 node=1');
    health.apiContact({ type: 'regained', at: clock.now() });
    health.nodeChanged(undefined);
    assert.equal(await gauge(), 'unsynced=0 api-server=0 node=0');
  });
});

describe('health and metrics HTTP endpoints', async () => {
  test("/healthz and /livez: kube-proxy's bodies and status codes, from the published state", async () => {
    const clock = new FakeClock(Date.UTC(2026, 11, 2, 10));
    const health = new ProxyHealth(clock, TIMEOUT);
    const answer = (path: string, stalled = false) =>
      healthAnswer(path, { ...health.shared.read(), stalled }, clock.now());

    assert.deepEqual(answer('/healthz'), {
      path: '/healthz',
      status: 200,
      body: '{"lastUpdated":"2026-12-02T10:00:00.000Z","currentTime":"2026-12-02T10:00:00.000Z","nodeEligible":true}',
    });

    health.observe(synced);
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT + 1);
    assert.deepEqual(answer('/livez'), {
      path: '/livez',
      status: 503,
      body: '{"lastUpdated":"2026-12-02T10:00:00.000Z","currentTime":"2026-12-02T10:01:00.001Z"}',
    });

    health.observe(synced);
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    assert.deepEqual(answer('/healthz'), {
      path: '/healthz',
      status: 503,
      body: '{"lastUpdated":"2026-12-02T10:01:00.001Z","currentTime":"2026-12-02T10:01:00.001Z","nodeEligible":false}',
    });
    assert.equal(answer('/livez').status, 200);

    // A stalled main thread fails both, whatever was published last.
    health.nodeChanged(node());
    assert.deepEqual(
      ['/healthz', '/livez'].map((path) => [answer(path).status, answer(path, true).status]),
      [
        [200, 503],
        [200, 503],
      ],
    );
    assert.deepEqual(answer('/other'), { path: undefined, status: 404, body: '404 page not found\n' });
  });

  test('/metrics serves the registry in Prometheus text format, /proxyMode the mode', async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    metrics.serviceChanged(Date.now());
    const server = await listenHttp('127.0.0.1', 0, metricsHandler(metrics, 'nftables'));
    t.after(() => server.close());
    const response = await fetch(`${server.url}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(await response.text(), /^kubeproxy_sync_proxy_rules_service_changes_total 1$/m);
    assert.equal(await (await fetch(`${server.url}/proxyMode`)).text(), 'nftables');
  });

  test('scrapes at the same time (they may share a rendering) all get it; a later one sees later values', async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const server = await listenHttp('127.0.0.1', 0, metricsHandler(metrics, 'nftables'));
    t.after(() => server.close());
    const scrape = async () => (await fetch(`${server.url}/metrics`)).text();
    const changes = /^kubeproxy_sync_proxy_rules_service_changes_total (\d+)$/m;
    const [first, second] = await Promise.all([scrape(), scrape()]);
    assert.equal(first.match(changes)?.[1], '0');
    assert.equal(second, first);
    metrics.serviceChanged(Date.now());
    assert.equal((await scrape()).match(changes)?.[1], '1');
  });

  test('listening on a port already taken rejects instead of crashing later', async (t) => {
    const first = await listenHttp('127.0.0.1', 0, () => {});
    t.after(() => first.close());
    await assert.rejects(
      listenHttp('127.0.0.1', first.port, () => {}),
      /EADDRINUSE/,
    );
  });
});

describe('parseHostPort', async () => {
  test('reads kube-proxy bind addresses', () => {
    assert.deepEqual(parseHostPort('0.0.0.0:10256'), { host: '0.0.0.0', port: 10256 });
    assert.deepEqual(parseHostPort('[::1]:10249'), { host: '::1', port: 10249 });
    assert.deepEqual(parseHostPort(':10256'), { host: '::', port: 10256 });
    assert.equal(parseHostPort('10256'), undefined);
    assert.equal(parseHostPort('1.2.3.4:70000'), undefined);
  });
});
