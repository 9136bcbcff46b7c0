import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { healthHandler, nodeEligible, ProxyHealth } from '../../src/daemon/health.ts';
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

describe('ProxyHealth', async () => {
  test('healthy until a queued change waits longer than the timeout without a sync', async () => {
    const clock = new FakeClock();
    const health = new ProxyHealth(clock, TIMEOUT);
    assert.equal(health.healthz().healthy, true, 'nothing queued yet');
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT - 1);
    assert.equal(health.healthz().healthy, true);
    await clock.advance(1);
    assert.equal(health.healthz().healthy, false);
    assert.equal(health.live().healthy, false);
    health.observe(synced);
    assert.equal(health.healthz().healthy, true);
    assert.equal(health.healthz().lastUpdated, clock.now());
  });

  test('a failed sync leaves the oldest change queued; later queued events do not reset its age', async () => {
    const clock = new FakeClock();
    const health = new ProxyHealth(clock, TIMEOUT);
    const t0 = clock.now();
    health.observe({ type: 'queued', at: t0 });
    await clock.advance(TIMEOUT / 2);
    health.observe({
      type: 'failed',
      requested: 'full',
      reason: 'start',
      error: new Error('x'),
      startedAt: t0,
      durationMs: 1,
      retryInMs: 1,
    });
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT / 2 + 1);
    assert.equal(health.live().healthy, false);
  });

  test('a node being deleted or tainted for scale-down fails /healthz but not /livez', () => {
    const health = new ProxyHealth(new FakeClock(), TIMEOUT);
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    assert.deepEqual([health.healthz().healthy, health.live().healthy], [false, true]);
    health.nodeChanged(node({ taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] }));
    assert.deepEqual([health.healthz().healthy, health.healthz().nodeEligible], [false, false]);
    health.nodeChanged(node({ taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] }));
    assert.equal(health.healthz().healthy, true);
  });

  test('nodeEligible: an unknown node (not yet seen) is eligible', () => {
    assert.equal(nodeEligible(undefined), true);
    assert.equal(nodeEligible(node()), true);
  });
});

describe('health and metrics HTTP endpoints', async () => {
  test('/healthz and /livez answer with kube-proxy bodies and status codes', async (t) => {
    const clock = new FakeClock(Date.UTC(2026, 11, 2, 10));
    const health = new ProxyHealth(clock, TIMEOUT);
    const served: string[] = [];
    const server = await listenHttp(
      '127.0.0.1',
      0,
      healthHandler(health, (path, code) => served.push(`${path} ${code}`)),
    );
    t.after(() => server.close());

    let response = await fetch(`${server.url}/healthz`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/json');
    assert.deepEqual(await response.json(), {
      lastUpdated: '2026-12-02T10:00:00.000Z',
      currentTime: '2026-12-02T10:00:00.000Z',
      nodeEligible: true,
    });

    health.observe(synced);
    health.observe({ type: 'queued', at: clock.now() });
    await clock.advance(TIMEOUT + 1);
    response = await fetch(`${server.url}/livez`);
    assert.equal(response.status, 503);
    assert.deepEqual(await response.json(), {
      lastUpdated: '2026-12-02T10:00:00.000Z',
      currentTime: '2026-12-02T10:01:00.001Z',
    });

    health.observe(synced);
    health.nodeChanged(node({ deletionTimestamp: '2026-12-02T10:00:00Z' }));
    response = await fetch(`${server.url}/healthz`);
    assert.equal(response.status, 503);
    assert.equal(((await response.json()) as { nodeEligible: boolean }).nodeEligible, false);
    assert.equal((await fetch(`${server.url}/livez`)).status, 200);
    assert.equal((await fetch(`${server.url}/other`)).status, 404);
    assert.deepEqual(served, ['/healthz 200', '/livez 503', '/healthz 503', '/livez 200']);
  });

  test('/metrics serves the registry in Prometheus text format, /proxyMode the mode', async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    metrics.serviceChanged();
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
    metrics.serviceChanged();
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
