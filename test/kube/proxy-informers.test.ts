import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { createInformerMetrics } from '../../src/kube/informer-metrics.ts';
import { createProxyInformers, startAll, stopAll, waitForAllSynced } from '../../src/kube/proxy-informers.ts';
import { ENDPOINT_SLICES, NODES, SERVICE_CIDRS, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './harness.ts';

const PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
const HEADLESS = 'service.kubernetes.io/headless';

function populate(server: StandInApiServer): void {
  server.state.apply(SERVICES, sampleService('default', 'ours'));
  server.state.apply(
    SERVICES,
    sampleService('default', 'other-proxy', { labels: { [PROXY_NAME]: 'other' } }),
  );
  server.state.apply(SERVICES, sampleService('default', 'claimed', { labels: { [PROXY_NAME]: 'kproxy' } }));
  server.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('default', 'ours-abc', { service: 'ours' }));
  server.state.apply(
    ENDPOINT_SLICES,
    sampleEndpointSlice('default', 'headless-abc', { labels: { [HEADLESS]: '' } }),
  );
  server.state.apply(
    ENDPOINT_SLICES,
    sampleEndpointSlice('default', 'claimed-abc', { service: 'claimed', labels: { [PROXY_NAME]: 'kproxy' } }),
  );
  server.state.apply(NODES, sampleNode('node-1'));
  server.state.apply(NODES, sampleNode('node-2', '192.168.0.11'));
}

async function withInformers(
  proxyName: string | undefined,
  check: (informers: ReturnType<typeof createProxyInformers>, server: StandInApiServer) => Promise<void>,
): Promise<void> {
  const server = await startApiServer();
  populate(server);
  const client = new KubeClient({ server: server.url });
  const informers = createProxyInformers({
    api: client,
    nodeName: 'node-1',
    ...(proxyName ? { proxyName } : {}),
    logger: pino({ level: 'silent' }),
    metrics: createInformerMetrics(new Registry()),
  });
  startAll(informers);
  try {
    await waitForAllSynced(informers);
    await check(informers, server);
  } finally {
    await stopAll(informers);
    await client.close();
    await server.stop();
  }
}

describe('proxy informers', () => {
  test('without a proxy name: unclaimed services, non-headless slices, and only this node', async () => {
    await withInformers(undefined, async ({ services, endpointSlices, node }, server) => {
      assert.deepEqual([...services.store.keys()], ['default/ours']);
      assert.deepEqual([...endpointSlices.store.keys()], ['default/ours-abc']);
      assert.deepEqual([...node.store.keys()], ['node-1']);
      assert.equal(node.store.get('node-1')?.status?.addresses?.[0]?.address, '192.168.0.10');
      // Services and slices are kept as versions only (the model keeps what it needs): heads.
      const version = server.state.get(SERVICES, 'default', 'ours')?.metadata.resourceVersion;
      assert.deepEqual(services.store.get('default/ours'), {
        kind: 'Service',
        metadata: { namespace: 'default', name: 'ours', resourceVersion: version },
      });
      // The filtering happens on the server: the selectors are in the requests.
      const selectors = server.requests.map(
        (r) => r.query.get('labelSelector') ?? r.query.get('fieldSelector'),
      );
      assert.ok(selectors.includes(`!${PROXY_NAME},!${HEADLESS}`));
      assert.ok(selectors.includes('metadata.name=node-1'));
    });
  });

  // Ours are those labelled with the name or for a handover, which one selector cannot ask for:
  // the model picks them (test/model/proxy-labels.test.ts), slices by their Service.
  test('with a proxy name: every Service, and every slice but the headless ones', async () => {
    await withInformers('kproxy', async ({ services, endpointSlices }, server) => {
      assert.deepEqual([...services.store.keys()].sort(), [
        'default/claimed',
        'default/other-proxy',
        'default/ours',
      ]);
      assert.deepEqual([...endpointSlices.store.keys()].sort(), ['default/claimed-abc', 'default/ours-abc']);
      const selectors = server.requests
        .filter((r) => r.path.endsWith('/services'))
        .map((r) => r.query.get('labelSelector'));
      assert.ok(selectors.length > 0 && selectors.every((s) => s === null), `${selectors}`);
    });
  });

  test('a service that another proxy claims later leaves the store with a delete event', async () => {
    await withInformers(undefined, async ({ services }, server) => {
      const events: string[] = [];
      services.onChange((e) => events.push(`${e.type} ${e.object.metadata.name}`));
      server.state.apply(SERVICES, sampleService('default', 'ours', { labels: { [PROXY_NAME]: 'other' } }));
      await eventually(() => assert.deepEqual(events, ['delete ours']));
      assert.equal(services.store.size, 0);
    });
  });

  test('ServiceCIDRs are watched: their changes arrive as events', async () => {
    await withInformers(undefined, async ({ serviceCIDRs }, server) => {
      assert.equal(serviceCIDRs.store.size, 0);
      const events: string[] = [];
      serviceCIDRs.onChange((e) => events.push(`${e.type} ${e.object.spec.cidrs.join(',')}`));
      const object = { metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.1/12'] } };
      server.state.apply(SERVICE_CIDRS, object);
      await eventually(() => assert.deepEqual(events, ['add 10.96.0.0/12']));
    });
  });

  test('a server that does not serve ServiceCIDRs (404): synced without them, said once, no stall', async () => {
    const server = await startApiServer({ unserved: ['servicecidrs'] });
    populate(server);
    const client = new KubeClient({ server: server.url });
    const lines: string[] = [];
    const informers = createProxyInformers({
      api: client,
      nodeName: 'node-1',
      logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }),
      metrics: createInformerMetrics(new Registry()),
      // Retries every few milliseconds: many 404s in the test's time, still one log line.
      backoff: { initialMs: 1, maxMs: 5 },
    });
    startAll(informers);
    try {
      await waitForAllSynced(informers);
      assert.equal(informers.serviceCIDRs.store.size, 0);
      assert.deepEqual([...informers.services.store.keys()], ['default/ours']);
      const asked = () => server.requests.filter((r) => r.path.endsWith('/servicecidrs')).length;
      await eventually(() => assert.ok(asked() >= 5, `asked ${asked()} times`));
      const said = lines.filter((line) => line.includes('does not serve this resource'));
      assert.equal(said.length, 1, said.join(''));
      assert.ok(!lines.some((line) => line.includes('"level":40') && line.includes('servicecidrs')));
    } finally {
      await stopAll(informers);
      await client.close();
      await server.stop();
    }
  });
});
