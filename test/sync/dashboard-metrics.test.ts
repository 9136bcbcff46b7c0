// The kube-proxy series that published dashboards and alerts read (kubernetes-mixin's "Kubernetes /
// Proxy" dashboard and its KubeProxyDown alert, the Grafana and Perses copies of it, netdata's and
// metricbeat's kube-proxy collectors): present at a scrape right after start, with kube-proxy's
// types and labels, and each moving when it should.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { SyncOutcome } from '../../contract/dataplane.ts';
import { registerRestClientMetrics } from '../../src/kube/rest-client-metrics.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';

interface Sample {
  readonly name: string;
  readonly type: string;
  readonly labels: Partial<Record<string, string | number>>;
  readonly value: number;
}

async function samples(registry: Registry): Promise<Sample[]> {
  return (await registry.getMetricsAsJSON()).flatMap((m) =>
    m.values.map((v) => ({
      // Histogram samples (_sum, _count, _bucket) carry their own metricName.
      name: (v as { metricName?: string }).metricName ?? m.name,
      type: String(m.type),
      labels: v.labels,
      value: v.value,
    })),
  );
}

function one(all: readonly Sample[], name: string, labels: Record<string, string> = {}): Sample {
  const found = all.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => String(s.labels[k]) === v),
  );
  assert.equal(found.length, 1, `one sample ${name} ${JSON.stringify(labels)}: ${found.length}`);
  return found[0]!;
}

/** Name, type and the label names of its samples (le aside), as kube-proxy (1.33+) exports them. */
const DASHBOARD_SERIES: readonly [string, string, readonly string[]][] = [
  ['kubeproxy_sync_proxy_rules_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_network_programming_duration_seconds', 'histogram', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'gauge', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'gauge', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'gauge', []],
  ['kubeproxy_sync_proxy_rules_endpoint_changes_total', 'counter', []],
  ['kubeproxy_sync_proxy_rules_service_changes_pending', 'gauge', []],
  ['kubeproxy_sync_proxy_rules_service_changes_total', 'counter', []],
  ['kubeproxy_sync_proxy_rules_iptables_total', 'gauge', ['ip_family', 'table']],
  ['kubeproxy_sync_proxy_rules_iptables_restore_failures_total', 'counter', ['ip_family']],
  ['kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', 'counter', ['ip_family']],
  ['rest_client_requests_total', 'counter', ['code', 'host', 'method']],
  ['rest_client_request_duration_seconds', 'histogram', ['verb', 'host']],
  ['process_cpu_seconds_total', 'counter', []],
  ['process_resident_memory_bytes', 'gauge', []],
  ['process_start_time_seconds', 'gauge', []],
];

const HOST = '10.96.0.1:443';

function iptablesMetrics(): { metrics: ProxyMetrics; request: ReturnType<typeof registerRestClientMetrics> } {
  const metrics = new ProxyMetrics('iptables');
  return { metrics, request: registerRestClientMetrics(metrics.registry, HOST) };
}

const outcome = (iptablesRules: SyncOutcome['iptablesRules'] = []): SyncOutcome => ({
  kind: 'full',
  objectCount: 0,
  conntrack: [],
  iptablesRules,
});

describe('the metrics kube-proxy dashboards read', () => {
  test('are all there, at zero, before any sync or request, with kube-proxy types and labels', async () => {
    const all = await samples(iptablesMetrics().metrics.registry);
    for (const [name, type, labelNames] of DASHBOARD_SERIES) {
      const own = all.filter((s) => s.name === name || s.name.startsWith(`${name}_`));
      assert.ok(own.length > 0, `${name} is exported`);
      assert.ok(
        own.every((s) => s.type === type),
        `${name} is a ${type}`,
      );
      for (const s of own)
        assert.deepEqual(
          Object.keys(s.labels)
            .filter((l) => l !== 'le')
            .sort(),
          [...labelNames].sort(),
          `${s.name} labels`,
        );
      if (name.startsWith('kubeproxy_') || name.startsWith('rest_client_'))
        assert.ok(
          own.every((s) => s.value === 0),
          `${name} starts at 0`,
        );
    }
    // Both families until a state says which the node serves; the sync histograms have their buckets.
    for (const ip_family of ['IPv4', 'IPv6']) {
      one(all, 'kubeproxy_sync_proxy_rules_duration_seconds_count', { ip_family });
      one(all, 'kubeproxy_network_programming_duration_seconds_bucket', { ip_family, le: '+Inf' });
      for (const table of ['filter', 'nat'])
        one(all, 'kubeproxy_sync_proxy_rules_iptables_total', { ip_family, table });
    }
    one(all, 'rest_client_requests_total', { code: '200', host: HOST, method: 'GET' });
    one(all, 'rest_client_request_duration_seconds_bucket', { verb: 'GET', host: HOST, le: '60' });
  });

  test('the iptables-only series are left out in the other modes', async () => {
    for (const mode of ['nftables', 'ipvs'] as const) {
      const names = new Set(
        (await samples(new ProxyMetrics(mode, { processMetrics: false }).registry)).map((s) => s.name),
      );
      assert.ok(!names.has('kubeproxy_sync_proxy_rules_iptables_total'), mode);
      assert.ok(!names.has('kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total'), mode);
      assert.ok(names.has('kubeproxy_sync_proxy_rules_endpoint_changes_pending'), mode);
    }
  });

  test('pending changes count up as they arrive and down once a sync that started after them succeeds', async () => {
    const { metrics } = iptablesMetrics();
    const pending = async () => {
      const all = await samples(metrics.registry);
      return [
        one(all, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending').value,
        one(all, 'kubeproxy_sync_proxy_rules_service_changes_pending').value,
        one(all, 'kubeproxy_sync_proxy_rules_endpoint_changes_total').value,
        one(all, 'kubeproxy_sync_proxy_rules_service_changes_total').value,
      ];
    };
    metrics.serviceChanged(1_000);
    metrics.endpointSliceChanged(1_100, undefined);
    metrics.endpointSliceChanged(1_200, undefined);
    assert.deepEqual(await pending(), [2, 1, 2, 1]);
    // A failed sync programs nothing: still pending.
    metrics.observe({
      type: 'failed',
      requested: 'full',
      reason: 'change',
      error: new Error('x'),
      startedAt: 1_150,
      durationMs: 5,
      retryInMs: 1_000,
    });
    assert.deepEqual(await pending(), [2, 1, 2, 1]);
    // This sync started at 1 150: the change received at 1 200 came in after it read the model.
    metrics.observe({
      type: 'synced',
      requested: 'full',
      reason: 'change',
      outcome: outcome(),
      startedAt: 1_150,
      durationMs: 100,
    });
    assert.deepEqual(await pending(), [1, 0, 2, 1]);
    metrics.observe({
      type: 'synced',
      requested: 'incremental',
      reason: 'change',
      outcome: outcome(),
      startedAt: 1_300,
      durationMs: 10,
    });
    assert.deepEqual(await pending(), [0, 0, 2, 1]);
  });

  test('iptables rule counts follow each sync per family and table; partial restore failures only incremental ones', async () => {
    const { metrics } = iptablesMetrics();
    metrics.noLocalEndpointsCounted({ IPv4: { internal: 0, external: 0 } });
    const rules = [
      { family: 'IPv4', table: 'filter', rules: 7 },
      { family: 'IPv4', table: 'nat', rules: 42 },
    ] as const;
    metrics.observe({
      type: 'synced',
      requested: 'full',
      reason: 'change',
      outcome: outcome(rules),
      startedAt: 0,
      durationMs: 1,
    });
    let all = await samples(metrics.registry);
    assert.equal(
      one(all, 'kubeproxy_sync_proxy_rules_iptables_total', { ip_family: 'IPv4', table: 'nat' }).value,
      42,
    );
    assert.equal(
      one(all, 'kubeproxy_sync_proxy_rules_iptables_total', { ip_family: 'IPv4', table: 'filter' }).value,
      7,
    );
    // The node serves IPv4 only: the IPv6 series set out at start are gone.
    assert.ok(!all.some((s) => s.labels.ip_family === 'IPv6'), 'no IPv6 series on an IPv4 node');

    const failed = (requested: 'full' | 'incremental') =>
      metrics.observe({
        type: 'failed',
        requested,
        reason: 'change',
        error: new Error('restore'),
        startedAt: 0,
        durationMs: 1,
        retryInMs: 1_000,
      });
    failed('incremental');
    failed('full');
    all = await samples(metrics.registry);
    const ip_family = 'IPv4';
    assert.equal(
      one(all, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total', { ip_family }).value,
      2,
    );
    assert.equal(
      one(all, 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', { ip_family }).value,
      1,
    );
  });

  test('API requests count by code (a connection error as client-go\'s "<error>") and time by verb', async () => {
    const registry = new Registry();
    const request = registerRestClientMetrics(registry, HOST);
    request({ method: 'GET', code: 200, seconds: 0.02 });
    request({ method: 'GET', code: 200, seconds: 3 });
    request({ method: 'GET', code: 429, seconds: 0.001 });
    request({ method: 'GET', code: undefined, seconds: 30 });
    const all = await samples(registry);
    const count = (code: string) =>
      one(all, 'rest_client_requests_total', { code, host: HOST, method: 'GET' }).value;
    assert.deepEqual([count('200'), count('429'), count('<error>')], [2, 1, 1]);
    const bucket = (le: string) =>
      one(all, 'rest_client_request_duration_seconds_bucket', { verb: 'GET', host: HOST, le }).value;
    // Answers only: a request that got none has no latency to its headers.
    assert.deepEqual([bucket('0.005'), bucket('0.025'), bucket('4'), bucket('+Inf')], [1, 2, 3, 3]);
  });
});
