import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { systemClock } from '../../contract/base/clock.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { allowance } from '../../harness/emulation.ts';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { capturedLogger } from '../support/captured-logger.ts';
import { freePort } from '../support/free-port.ts';
import { configFromYaml, eventually, FAST_CONFIG, RecordingDataplane } from './daemon-harness.ts';
import { startRecordingDaemon, webCluster } from './recording-daemon.ts';

interface Running {
  readonly api: StandInApiServer;
  readonly dataplane: RecordingDataplane;
  readonly daemon: Daemon;
  readonly lines: Record<string, unknown>[];
}

/** A stand-in API server holding web (one endpoint) and node-1, and a daemon against it. */
/**
 * How long the stand-in API server holds its first answers where a test needs the daemon's start
 * over before they come: the start waits for the health listener's thread to listen (~0.5 s from
 * a checkout, where that thread strips TypeScript too; more on a loaded machine).
 */
const FIRST_ANSWERS_HELD_MS = allowance(2_000);

async function run(
  t: { after(fn: () => Promise<unknown>): void },
  setup?: (api: StandInApiServer) => void,
  metrics = new ProxyMetrics('nftables', { processMetrics: false }),
  dataplane = new RecordingDataplane(),
) {
  const objects = (api: StandInApiServer) => {
    webCluster(api);
    setup?.(api);
  };
  const { api, daemon, lines } = await startRecordingDaemon(t, { objects, metrics, dataplane });
  return { api, dataplane, daemon, lines } satisfies Running;
}

/** A daemon started with `field` on a port another listener holds. */
async function startOnTakenPort(
  t: { after(fn: () => Promise<unknown>): void },
  field: 'metricsBindAddress' | 'healthzBindAddress',
) {
  const api = await startApiServer({ port: await freePort() });
  t.after(() => api.stop());
  const client = new KubeClient({ server: api.url });
  t.after(() => client.close());
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => taken.close(resolve)));
  const port = (taken.address() as AddressInfo).port;
  const dataplane = new RecordingDataplane();
  const started = await startDaemon({
    config: await configFromYaml(FAST_CONFIG.replace(`${field}: 127.0.0.1:0`, `${field}: 127.0.0.1:${port}`)),
    logger: capturedLogger().logger,
    api: client,
    dataplane,
    clock: systemClock,
    informerBackoff: { initialMs: 20, maxMs: 100 },
    metrics: new ProxyMetrics('nftables', { processMetrics: false }),
  });
  return { api, dataplane, started, port };
}

const portKeys = (r: Running) => [...(r.dataplane.last?.state.IPv4?.servicePorts.keys() ?? [])];

describe('daemon against the stand-in API server', () => {
  test('syncs only once the informers have synced; the first sync is full and holds the cluster', async (t) => {
    const r = await run(t, (api) => api.faults.stallNext(3, FIRST_ANSWERS_HELD_MS));
    assert.equal(r.dataplane.syncs.length, 0, 'no sync while the API server has not answered');
    assert.equal(r.dataplane.starts, 1, 'earlier rules are adopted before startDaemon returns');
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const first = r.dataplane.syncs[0]!;
    assert.equal(first.kind, 'full');
    const web = first.state.IPv4?.servicePorts.get('default/web:80/TCP');
    assert.deepEqual(
      web?.clusterEndpoints.map((e) => `${e.ip}:${e.port}`),
      ['10.244.0.5:8080'],
    );
    assert.deepEqual(first.state.IPv4?.node.nodeIPs, ['192.168.0.10']);
    const line = r.lines.find((l) => l.msg === 'rules synced');
    assert.ok(line, 'one log line per sync');
    assert.equal(line.kind, 'full');
    assert.equal(line.servicePorts, 1);
    assert.equal(line.endpoints, 1);
    assert.equal(typeof line.durationMs, 'number');
  });

  test('the informers list while the earlier rules are adopted; the first sync waits for both', async (t) => {
    let server: StandInApiServer | undefined;
    const asked = (path: string) => server?.requests.some((q) => q.path.endsWith(path)) ?? false;
    // An adoption (nft, another process) that ends only once both lists have been asked for.
    const dataplane = new (class extends RecordingDataplane {
      syncsDuringStart: number | undefined;
      override async start(): Promise<void> {
        await eventually('both lists asked for', () => asked('/services') && asked('/endpointslices'));
        this.syncsDuringStart = this.syncs.length;
        await super.start();
      }
    })();
    const r = await run(t, (api) => (server = api), undefined, dataplane);
    assert.equal(r.dataplane.starts, 1, 'adopted once both lists were asked for');
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    assert.equal(dataplane.syncsDuringStart, 0, 'no sync before the adoption ended');
    assert.equal(r.dataplane.syncs[0]!.kind, 'full');
  });

  test('services created, changed and deleted are followed by incremental syncs', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    r.api.state.apply(SERVICES, sampleService('default', 'db', { clusterIP: '10.96.0.20', port: 5432 }));
    await eventually('db added', () => portKeys(r).includes('default/db:5432/TCP'));
    r.api.state.apply(SERVICES, sampleService('default', 'db', { clusterIP: '10.96.0.20', port: 5433 }));
    await eventually('db port changed', () => portKeys(r).includes('default/db:5433/TCP'));
    assert.ok(!portKeys(r).includes('default/db:5432/TCP'));
    r.api.state.apply(
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-abc', { service: 'web', addresses: ['10.244.0.5', '10.244.0.6'] }),
    );
    await eventually(
      'second web endpoint',
      () =>
        r.dataplane.last?.state.IPv4?.servicePorts.get('default/web:80/TCP')?.clusterEndpoints.length === 2,
    );
    r.api.state.delete(SERVICES, 'default', 'db');
    await eventually('db deleted', () => !portKeys(r).some((k) => k.startsWith('default/db:')));
    assert.ok(r.dataplane.syncs.slice(1).every((s) => s.kind === 'incremental'));
  });

  test('invalid objects from the API server are logged, counted and skipped; syncs go on with the rest', async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const r = await run(t, undefined, metrics);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    r.api.state.apply(SERVICES, sampleService('default', 'bad', { clusterIP: '10.96.0.30', port: 70000 }));
    r.api.state.apply(
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-bad', { service: 'web', addresses: ['1.2.3'] }),
    );
    r.api.state.apply(SERVICES, sampleService('default', 'db', { clusterIP: '10.96.0.20', port: 5432 }));
    await eventually('db added', () => portKeys(r).includes('default/db:5432/TCP'));
    assert.ok(!portKeys(r).some((key) => key.startsWith('default/bad:')));
    const skipped = r.lines.filter((l) => l.msg === 'invalid object skipped').map((l) => String(l.reason));
    assert.ok(
      skipped.some((reason) => reason.includes('spec.ports[0].port')),
      skipped.join('; '),
    );
    assert.ok(
      skipped.some((reason) => reason.includes('addresses[0]')),
      skipped.join('; '),
    );
    const errors =
      (await metrics.registry.getSingleMetric('kproxy_informer_errors_total')?.get())?.values ?? [];
    const invalid = errors.filter((v) => v.labels.reason === 'invalid').reduce((sum, v) => sum + v.value, 0);
    assert.ok(invalid >= 2, `kproxy_informer_errors_total{reason="invalid"} is ${invalid}`);
    assert.ok(!r.lines.some((l) => String(l.msg).startsWith('sync failed')), 'no sync failed');
  });

  test('a model problem (a slice port without a name) is logged once and shown by a gauge', async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const r = await run(t, undefined, metrics);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const gauge = async () =>
      (await metrics.registry.getSingleMetric('kproxy_sync_proxy_rules_skipped_problems')?.get())?.values[0]
        ?.value;
    assert.equal(await gauge(), 0);
    const slice = sampleEndpointSlice('default', 'web-unnamed', { service: 'web' });
    r.api.state.apply(ENDPOINT_SLICES, { ...slice, ports: [{ protocol: 'TCP', port: 8080 }] });
    await eventually('problem logged', () =>
      r.lines.some((l) => l.object === 'EndpointSlice default/web-unnamed'),
    );
    await eventually('gauge', async () => (await gauge()) === 1);
    r.api.state.delete(ENDPOINT_SLICES, 'default', 'web-unnamed');
    await eventually('gauge back to 0', async () => (await gauge()) === 0);
  });

  test('a node label change asks for a full sync', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const before = r.dataplane.syncs.length;
    const node = sampleNode('node-1');
    (node.metadata as { labels: Record<string, string> }).labels['topology.kubernetes.io/zone'] = 'zone-b';
    r.api.state.apply(NODES, node);
    await eventually('resync after the label change', () => r.dataplane.syncs.length > before);
    assert.equal(r.dataplane.last?.kind, 'full');
  });

  test('a failed sync is retried as a full sync and counted', async (t) => {
    // Set before the start: the first sync does not wait for startDaemon to return.
    const dataplane = new RecordingDataplane();
    dataplane.failNext = 2;
    const r = await run(t, undefined, undefined, dataplane);
    await eventually('a sync after two failures', () => r.dataplane.syncs.length > 0);
    assert.equal(r.dataplane.syncs[0]?.kind, 'full');
    const text = await (await fetch(`${r.daemon.metricsUrl}/metrics`)).text();
    assert.match(text, /^kubeproxy_sync_proxy_rules_nftables_sync_failures_total\{ip_family="IPv4"\} 2$/m);
    assert.ok(r.lines.some((l) => l.msg === 'sync failed; retrying with a full sync' && l.level === 50));
    assert.match(text, /^kproxy_sync_bugs_total 0$/m, 'a refusal by the kernel is not a bug');
  });

  test('a bug in a sync is logged at error with its stack, counted, and the retry is full', async (t) => {
    const dataplane = new RecordingDataplane();
    dataplane.failNext = 1;
    dataplane.failure = new TypeError("Cannot read properties of undefined (reading 'key')");
    const r = await run(t, undefined, undefined, dataplane);
    await eventually('a sync after the bug', () => r.dataplane.syncs.length > 0);
    assert.equal(r.dataplane.syncs[0]?.kind, 'full');
    const text = await (await fetch(`${r.daemon.metricsUrl}/metrics`)).text();
    assert.match(text, /^kproxy_sync_bugs_total 1$/m);
    const line = r.lines.find((l) => String(l.msg).startsWith('sync failed on a bug in kproxy'));
    assert.equal(line?.level, 50);
    assert.match(String((line?.err as { stack?: string } | undefined)?.stack), /^TypeError: Cannot read/);
  });

  test("a dashboard's series: there before the first sync, and changes pending until a sync programs them", async (t) => {
    const metrics = new ProxyMetrics('nftables', { processMetrics: false });
    const value = async (name: string, labels: Record<string, string> = {}) => {
      const found = (await metrics.registry.getMetricsAsJSON())
        .flatMap((m) =>
          m.values.map((v) => ({ ...v, name: (v as { metricName?: string }).metricName ?? m.name })),
        )
        .find((v) => v.name === name && Object.entries(labels).every(([k, l]) => v.labels[k] === l));
      return found?.value ?? assert.fail(`no ${name} ${JSON.stringify(labels)}`);
    };
    const r = await run(t, (api) => api.faults.stallNext(3, FIRST_ANSWERS_HELD_MS), metrics);
    assert.equal(r.dataplane.syncs.length, 0, 'the API server has not answered yet');
    const ip_family = 'IPv4';
    assert.equal(await value('kubeproxy_sync_proxy_rules_duration_seconds_count', { ip_family }), 0);
    assert.equal(
      await value('kubeproxy_network_programming_duration_seconds_bucket', { ip_family, le: '+Inf' }),
      0,
    );
    assert.equal(await value('kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 0);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    assert.ok((await value('kubeproxy_sync_proxy_rules_duration_seconds_count', { ip_family })) >= 1);
    assert.ok((await value('kubeproxy_sync_proxy_rules_endpoint_changes_total')) >= 1, 'the slice listed');
    await eventually(
      'the listed objects programmed',
      async () => (await value('kubeproxy_sync_proxy_rules_service_changes_pending')) === 0,
    );

    // The kernel refuses every sync: a new service stays pending, and is counted.
    r.dataplane.failNext = Number.POSITIVE_INFINITY;
    const total = await value('kubeproxy_sync_proxy_rules_service_changes_total');
    r.api.state.apply(SERVICES, sampleService('default', 'db', { clusterIP: '10.96.0.11' }));
    await eventually(
      'db received',
      async () => (await value('kubeproxy_sync_proxy_rules_service_changes_total')) === total + 1,
    );
    await eventually(
      'a sync refused',
      async () => (await value('kubeproxy_sync_proxy_rules_nftables_sync_failures_total', { ip_family })) > 0,
    );
    assert.equal(await value('kubeproxy_sync_proxy_rules_service_changes_pending'), 1);
    r.dataplane.failNext = 0;
    await eventually(
      'db programmed',
      async () => (await value('kubeproxy_sync_proxy_rules_service_changes_pending')) === 0,
    );
    assert.ok(portKeys(r).includes('default/db:80/TCP'));
  });

  test('/healthz, /livez and /metrics are served with kube-proxy semantics', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const healthz = await fetch(`${r.daemon.healthzUrl}/healthz`);
    assert.equal(healthz.status, 200);
    assert.equal(((await healthz.json()) as { nodeEligible: boolean }).nodeEligible, true);
    assert.equal((await fetch(`${r.daemon.healthzUrl}/livez`)).status, 200);
    const metrics = await (await fetch(`${r.daemon.metricsUrl}/metrics`)).text();
    const last = /^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} (\S+)$/m.exec(
      metrics,
    );
    assert.ok(last && Number(last[1]) > 0, 'last sync timestamp is set');
    assert.match(
      metrics,
      /^kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]/m,
    );
    assert.match(metrics, /^kubeproxy_sync_proxy_rules_service_changes_total 1$/m);
    assert.match(metrics, /^kubeproxy_proxy_healthz_total\{code="200"\} 1$/m);
    assert.match(metrics, /^kproxy_informer_relists_total\{resource="services",reason="initial"\} 1$/m);
    assert.equal(await (await fetch(`${r.daemon.metricsUrl}/proxyMode`)).text(), 'nftables');
  });

  test('a node marked for deletion fails /healthz but not /livez', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const node = sampleNode('node-1');
    (node.spec as Record<string, unknown>).taints = [
      { key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' },
    ];
    r.api.state.apply(NODES, node);
    await eventually(
      'healthz 503',
      async () => (await fetch(`${r.daemon.healthzUrl}/healthz`)).status === 503,
    );
    assert.equal((await fetch(`${r.daemon.healthzUrl}/livez`)).status, 200);
  });

  test('an API server outage leaves the rules, turns healthz 503 after the timeout, and recovery resyncs', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    await r.api.stop();
    // Health timeout is 2 × syncPeriod = 1 s.
    await eventually('healthz 503 during the outage', async () => {
      return (await fetch(`${r.daemon.healthzUrl}/healthz`)).status === 503;
    });
    assert.equal(r.dataplane.cleanups, 0, 'rules are never removed');
    assert.ok(portKeys(r).includes('default/web:80/TCP'), 'the last synced state still stands');
    // The cluster moves on while the node cannot see it.
    r.api.state.apply(SERVICES, sampleService('default', 'late', { clusterIP: '10.96.0.30' }));
    await r.api.start();
    await eventually('the change made during the outage is synced', () =>
      portKeys(r).includes('default/late:80/TCP'),
    );
    await eventually(
      'healthz 200 again',
      async () => (await fetch(`${r.daemon.healthzUrl}/healthz`)).status === 200,
    );
    assert.ok(r.lines.some((l) => l.msg === 'lost contact with the API server; rules stay as they are'));
  });

  test('stop() leaves the rules and ends syncing and listening', async (t) => {
    const r = await run(t);
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    await r.daemon.stop();
    const count = r.dataplane.syncs.length;
    r.api.state.apply(SERVICES, sampleService('default', 'after', { clusterIP: '10.96.0.40' }));
    await assert.rejects(fetch(`${r.daemon.healthzUrl}/healthz`));
    assert.equal(r.dataplane.cleanups, 0);
    assert.equal(r.dataplane.syncs.length, count);
    assert.ok(r.lines.some((l) => l.msg === 'stopped; rules left in place'));
    assert.ok(!r.lines.some((l) => l.msg === 'lost contact with the API server; rules stay as they are'));
  });

  test('a metrics listener that cannot listen fails the start and ends the informers and the adoption it began', async (t) => {
    const { api, dataplane, started, port } = await startOnTakenPort(t, 'metricsBindAddress');
    assert.deepEqual(started, {
      ok: false,
      error: `metricsBindAddress: cannot listen on 127.0.0.1:${port}: EADDRINUSE`,
    });
    // The informers and the adoption start before the listeners (daemon.ts): nothing outlives the
    // failure. The informers may have begun watching while the health listener's thread started;
    // the server sees those watches end once their connections close.
    assert.equal(dataplane.starts, 1);
    await eventually('the watches closed', () => api.openWatches === 0);
    const requests = api.requests.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(api.requests.length, requests);
    assert.equal(dataplane.syncs.length, 0);
  });

  test('a health listener that cannot listen fails the start; the informers and the loop end', async (t) => {
    const { api, dataplane, started, port } = await startOnTakenPort(t, 'healthzBindAddress');
    assert.deepEqual(started, {
      ok: false,
      error: `healthzBindAddress: cannot listen on 127.0.0.1:${port}: EADDRINUSE`,
    });
    // The first sync does not wait for the health listener's thread, so one may have run.
    await eventually('the watches closed', () => api.openWatches === 0);
    const requests = api.requests.length;
    const syncs = dataplane.syncs.length;
    await new Promise((resolve) => setTimeout(resolve, 2 * 500));
    assert.equal(api.requests.length, requests);
    assert.equal(dataplane.syncs.length, syncs, 'no sync after the failed start (syncPeriod 500 ms)');
  });

  test('a dual-stack node syncs both families in one state', async (t) => {
    const r = await run(t, (api) => {
      const node = sampleNode('node-1');
      (node.status as { addresses: unknown[] }).addresses.push({ type: 'InternalIP', address: 'fd00::10' });
      api.state.apply(NODES, node);
      const service = sampleService('default', 'dual', { clusterIP: '10.96.0.50' });
      Object.assign(service.spec as object, {
        clusterIPs: ['10.96.0.50', 'fd00:96::50'],
        ipFamilies: ['IPv4', 'IPv6'],
        ipFamilyPolicy: 'RequireDualStack',
      });
      api.state.apply(SERVICES, service);
      api.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('default', 'dual-v4', { service: 'dual' }));
      const v6 = sampleEndpointSlice('default', 'dual-v6', { service: 'dual' });
      Object.assign(v6, { addressType: 'IPv6' });
      (v6.endpoints as { addresses: string[] }[])[0]!.addresses = ['fd00:244::5'];
      api.state.apply(ENDPOINT_SLICES, v6);
    });
    await eventually('first sync', () => r.dataplane.syncs.length > 0);
    const { state } = r.dataplane.syncs[0]!;
    assert.equal(state.IPv4?.servicePorts.get('default/dual:80/TCP')?.clusterIP, '10.96.0.50');
    const v6 = state.IPv6?.servicePorts.get('default/dual:80/TCP');
    assert.equal(v6?.clusterIP, 'fd00:96::50');
    assert.deepEqual(
      v6?.clusterEndpoints.map((e) => e.ip),
      ['fd00:244::5'],
    );
  });
});
