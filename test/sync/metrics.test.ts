import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CommandTimeoutError } from '../../contract/dataplane-error.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { IptablesCommandError } from '../../dataplanes/iptables/live.ts';
import { endpoint, localEndpoint, proxyState, servicePort } from '../../harness/proxy-states.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { StateCounter } from '../../src/sync/state-counts.ts';

async function value(
  metrics: ProxyMetrics,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  // Histogram samples (_sum, _count, _bucket) carry their own metricName.
  const samples = (await metrics.registry.getMetricsAsJSON()).flatMap((m) =>
    m.values.map((v) => ({ ...v, name: (v as { metricName?: string }).metricName ?? m.name })),
  );
  const named = samples.filter((v) => v.name === name);
  assert.ok(named.length > 0, `metric ${name} is exposed`);
  const sample = named.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return sample?.value ?? 0;
}

const synced = (kind: 'full' | 'incremental', startedAt: number, durationMs: number, objectCount = 10) =>
  ({
    type: 'synced',
    requested: kind,
    reason: 'change',
    outcome: { kind, objectCount, conntrack: [{ family: 'IPv4', deleted: 3, durationMs: 4, unparsed: 0 }] },
    startedAt,
    durationMs,
  }) as const;

/** What the daemon does with each state it hands to the dataplane. */
function stateBuilt(metrics: ProxyMetrics, state: DualStackState): void {
  metrics.noLocalEndpointsCounted(new StateCounter().update(state).noLocal);
}

describe('the no-local-endpoints count', () => {
  test('counts Local policies without a local endpoint, per family and per policy', () => {
    const remote = [endpoint('10.2.0.5', 80)];
    const remote6 = [endpoint('fd00:2::5', 80)];
    const external = { nodePort: 30080, externalPolicyLocal: true };
    const state: DualStackState = {
      IPv4: proxyState('IPv4', [
        servicePort('a', { internalPolicyLocal: true, hasEndpoints: true }),
        servicePort('b', { ...external, clusterEndpoints: remote }),
        servicePort('c', { ...external, internalPolicyLocal: true, clusterEndpoints: remote }),
        servicePort('d', { internalPolicyLocal: true, localEndpoints: [localEndpoint('10.1.0.5', 80)] }),
        servicePort('e', { clusterEndpoints: remote }),
      ]),
      IPv6: proxyState('IPv6', [servicePort('a6', { ...external, clusterEndpoints: remote6 })]),
    };
    assert.deepEqual(new StateCounter().update(state).noLocal, {
      IPv4: { internal: 2, external: 2 },
      IPv6: { internal: 0, external: 1 },
    });
  });

  test('leaves out services without any endpoint: their traffic is rejected, as kube-proxy counts', () => {
    const state: DualStackState = {
      IPv4: proxyState('IPv4', [
        servicePort('a', { internalPolicyLocal: true }),
        servicePort('b', { nodePort: 30080, externalPolicyLocal: true }),
      ]),
    };
    assert.deepEqual(new StateCounter().update(state).noLocal, { IPv4: { internal: 0, external: 0 } });
  });
});

/** ProxyMetrics after a state of these families was built (the ip_family label's values). */
function serving(mode: 'nftables' | 'iptables' | 'ipvs', families: readonly ('IPv4' | 'IPv6')[] = ['IPv4']) {
  const metrics = new ProxyMetrics(mode, { processMetrics: false });
  stateBuilt(metrics, Object.fromEntries(families.map((f) => [f, proxyState(f, [])])));
  return metrics;
}

const V4 = { ip_family: 'IPv4' };
const V6 = { ip_family: 'IPv6' };

describe('ProxyMetrics', () => {
  test('exposes kube-proxy metric names in its own registry, not the global one', async () => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const text = await metrics.registry.metrics();
    for (const name of [
      'kubeproxy_sync_proxy_rules_duration_seconds',
      'kubeproxy_sync_full_proxy_rules_duration_seconds',
      'kubeproxy_sync_partial_proxy_rules_duration_seconds',
      'kubeproxy_network_programming_duration_seconds',
      'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
      'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
      'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
      'kubeproxy_sync_proxy_rules_endpoint_changes_total',
      'kubeproxy_sync_proxy_rules_service_changes_total',
      'kubeproxy_conntrack_reconciler_deleted_entries_total',
      'kubeproxy_conntrack_reconciler_sync_duration_seconds',
      'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
      'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'));
    }
    // A second instance does not collide with the first (a global registry would throw).
    new ProxyMetrics('nftables', { processMetrics: false });
  });

  test('process metrics are collected when asked for', async () => {
    const text = await new ProxyMetrics('iptables').registry.metrics();
    assert.match(text, /^process_resident_memory_bytes /m);
    assert.match(text, /^# TYPE kubeproxy_sync_proxy_rules_iptables_restore_failures_total counter/m);
  });

  test('a sync splits its duration into full or partial by what actually ran', async () => {
    const metrics = serving('nftables');
    metrics.observe(synced('full', 1_000, 250));
    metrics.observe(synced('incremental', 5_000, 20));
    metrics.observe(synced('incremental', 9_000, 30, 12));
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_duration_seconds_count'), 3);
    assert.equal(await value(metrics, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count'), 1);
    assert.equal(await value(metrics, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count'), 2);
    assert.equal(await value(metrics, 'kubeproxy_sync_full_proxy_rules_duration_seconds_sum'), 0.25);
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), 9.03);
    assert.equal(await value(metrics, 'kproxy_sync_proxy_rules_objects'), 12);
    assert.equal(await value(metrics, 'kubeproxy_conntrack_reconciler_deleted_entries_total', V4), 9);
  });

  test('the conntrack reconciler counts deletions and observes its duration per family, as upstream', async () => {
    const metrics = serving('iptables', ['IPv4', 'IPv6']);
    const deleted = 'kubeproxy_conntrack_reconciler_deleted_entries_total';
    const duration = 'kubeproxy_conntrack_reconciler_sync_duration_seconds';
    // Both families' series exist before any deletion (dashboards see a 0, not a gap).
    assert.match(
      await metrics.registry.metrics(),
      /^kubeproxy_conntrack_reconciler_deleted_entries_total\{ip_family="IPv6"\} 0$/m,
    );
    const outcome = {
      kind: 'incremental',
      objectCount: 1,
      conntrack: [
        { family: 'IPv4', deleted: 0, durationMs: 2, unparsed: 0 },
        { family: 'IPv6', deleted: 5, durationMs: 500, unparsed: 1 },
      ],
    } as const;
    metrics.observe({
      type: 'synced',
      requested: 'incremental',
      reason: 'change',
      outcome,
      startedAt: 0,
      durationMs: 1,
    });
    // A sync after which the reconciler did not run (no UDP change) observes nothing.
    metrics.observe({ ...synced('incremental', 10, 1), outcome: { ...outcome, conntrack: [] } });
    assert.equal(await value(metrics, deleted, V4), 0);
    assert.equal(await value(metrics, deleted, V6), 5);
    assert.equal(await value(metrics, `${duration}_count`, V4), 1);
    assert.equal(await value(metrics, `${duration}_count`, V6), 1);
    assert.equal(await value(metrics, `${duration}_sum`, V6), 0.5);
  });

  test('failures are counted, and do not move the last-synced timestamp', async () => {
    const metrics = serving('nftables');
    metrics.observe(synced('full', 1_000, 100));
    metrics.observe({
      type: 'failed',
      requested: 'incremental',
      reason: 'change',
      error: new Error('x'),
      startedAt: 5_000,
      durationMs: 10,
      retryInMs: 1_000,
    });
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), 1);
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), 1.1);
  });

  test('a sync failed by a command that timed out is counted under that command as well', async () => {
    const metrics = serving('iptables');
    const failed = (error: Error) => ({
      type: 'failed' as const,
      requested: 'full' as const,
      reason: 'retry' as const,
      error,
      startedAt: 5_000,
      durationMs: 10,
      retryInMs: 1_000,
    });
    metrics.observe(failed(new CommandTimeoutError('iptables-legacy-restore', 120_000)));
    metrics.observe(failed(new Error('iptables-legacy-restore failed: bad rule')));
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total'), 2);
    const timeouts = 'kproxy_sync_command_timeouts_total';
    assert.equal(await value(metrics, timeouts, { command: 'iptables-legacy-restore' }), 1);
  });

  test('a sync failed by anything but a dataplane error is also counted as a bug', async () => {
    const metrics = serving('iptables');
    const failed = (error: Error) => ({
      type: 'failed' as const,
      requested: 'incremental' as const,
      reason: 'change' as const,
      error,
      startedAt: 5_000,
      durationMs: 10,
      retryInMs: 1_000,
    });
    metrics.observe(failed(new IptablesCommandError('iptables-legacy-restore', 'line 3 failed')));
    metrics.observe(failed(new CommandTimeoutError('iptables-legacy-restore', 120_000)));
    metrics.observe(failed(new TypeError("Cannot read properties of undefined (reading 'key')")));
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total'), 3);
    assert.equal(await value(metrics, 'kproxy_sync_bugs_total'), 1);
  });

  test('queued sets the last-queued timestamp', async () => {
    const metrics = serving('nftables');
    metrics.observe({ type: 'queued', at: 42_000 });
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds'), 42);
  });

  test('network programming latency runs from the trigger time to the end of the sync that covered it', async () => {
    const metrics = serving('nftables');
    const t = Date.UTC(2026, 11, 2, 10);
    metrics.endpointSliceChanged(t + 500, { triggeredAt: t, family: 'IPv4' });
    metrics.endpointSliceChanged(t + 600, undefined);
    // Arrives after the sync started: that sync did not program it.
    metrics.endpointSliceChanged(t + 2_500, { triggeredAt: t + 2_000, family: 'IPv4' });
    metrics.observe(synced('incremental', t + 1_000, 1_500));
    const name = 'kubeproxy_network_programming_duration_seconds';
    assert.equal(await value(metrics, `${name}_count`), 1);
    assert.equal(await value(metrics, `${name}_sum`), 2.5);
    metrics.observe(synced('incremental', t + 3_000, 1_000));
    assert.equal(await value(metrics, `${name}_count`), 2);
    assert.equal(await value(metrics, `${name}_sum`), 4.5);
    assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 3);
  });

  test('no-local-endpoint gauges follow the latest state', async () => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const remote = [endpoint('10.2.0.5', 80)];
    stateBuilt(metrics, {
      IPv4: proxyState('IPv4', [servicePort('a', { internalPolicyLocal: true, hasEndpoints: true })]),
    });
    stateBuilt(metrics, {
      IPv4: proxyState('IPv4', [
        servicePort('b', { nodePort: 30080, externalPolicyLocal: true, clusterEndpoints: remote }),
      ]),
    });
    const name = 'kubeproxy_sync_proxy_rules_no_local_endpoints_total';
    assert.equal(await value(metrics, name, { traffic_policy: 'internal' }), 0);
    assert.equal(await value(metrics, name, { traffic_policy: 'external' }), 1);
  });

  test('kube-proxy 1.33+ labels: each sync series once per family served, under ip_family', async () => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    metrics.observe({ type: 'queued', at: 1_000 });
    const remote6 = [endpoint('fd00:2::5', 80)];
    stateBuilt(metrics, {
      IPv4: proxyState('IPv4', []),
      IPv6: proxyState('IPv6', [
        servicePort('b', { nodePort: 30080, externalPolicyLocal: true, clusterEndpoints: remote6 }),
      ]),
    });
    const t = Date.UTC(2026, 11, 2, 10);
    metrics.endpointSliceChanged(t + 100, { triggeredAt: t, family: 'IPv6' });
    metrics.observe(synced('full', t + 1_000, 500));
    metrics.observe({
      type: 'failed',
      requested: 'incremental',
      reason: 'change',
      error: new Error('x'),
      startedAt: t + 5_000,
      durationMs: 10,
      retryInMs: 1_000,
    });
    for (const family of [V4, V6]) {
      assert.equal(await value(metrics, 'kubeproxy_sync_proxy_rules_duration_seconds_count', family), 2);
      assert.equal(await value(metrics, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count', family), 1);
      assert.equal(
        await value(metrics, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count', family),
        1,
      );
      assert.equal(
        await value(metrics, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', family),
        (t + 1_500) / 1000,
      );
      // Queued before the first state: the family still shows it.
      assert.equal(
        await value(metrics, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', family),
        1,
      );
      assert.equal(
        await value(metrics, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total', family),
        1,
      );
    }
    const noLocal = 'kubeproxy_sync_proxy_rules_no_local_endpoints_total';
    assert.equal(await value(metrics, noLocal, { ...V6, traffic_policy: 'external' }), 1);
    assert.equal(await value(metrics, noLocal, { ...V4, traffic_policy: 'external' }), 0);
    // The IPv6 slice's latency is the IPv6 rules' alone.
    const programming = 'kubeproxy_network_programming_duration_seconds_count';
    assert.equal(await value(metrics, programming, V6), 1);
    assert.equal(await value(metrics, programming, V4), 0);
    const text = await metrics.registry.metrics();
    assert.match(text, /^kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total\{ip_family="IPv6"\} 0$/m);
    // Only the families served: a single-stack IPv4 node shows no IPv6 series.
    const single = serving('iptables', ['IPv4']);
    single.observe(synced('full', 1_000, 10));
    const singleText = await single.registry.metrics();
    assert.match(
      singleText,
      /^kubeproxy_sync_proxy_rules_iptables_restore_failures_total\{ip_family="IPv4"\} 0$/m,
    );
    assert.doesNotMatch(singleText, /ip_family="IPv6"/);
  });
});
