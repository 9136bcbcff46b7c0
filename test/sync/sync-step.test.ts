import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { describe, test } from 'node:test';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../../contract/dataplane.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import { IptablesCommandError } from '../../dataplanes/iptables/live.ts';
import { HealthCheckNodePorts } from '../../src/daemon/health-check-node-ports.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type { KubeObject } from '../../src/kube/objects.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { SyncStep } from '../../src/sync/sync-step.ts';
import { endpoint, node, options, service, slice, THIS_NODE } from '../model/fixtures.ts';
import { capturedLogger } from '../support/captured-logger.ts';
import { freePort } from '../support/free-port.ts';

function decoded<T extends KubeObject>(raw: T): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') assert.fail(`fixture does not decode: ${JSON.stringify(result)}`);
  return result.object as T;
}

interface DataplaneCall {
  readonly kind: SyncKind;
  readonly state: DualStackState;
  readonly changed: readonly ServicePortKey[] | undefined;
}

/** Records what it is asked; `failWith` makes the next sync throw it; `during` runs inside each sync. */
class FakeDataplane implements Pick<LiveDataplane, 'sync' | 'intact'> {
  readonly calls: DataplaneCall[] = [];
  failWith: Error | undefined;
  during: ((call: DataplaneCall) => void) | undefined;

  async sync(
    state: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    const failure = this.failWith;
    this.failWith = undefined;
    if (failure) throw failure;
    const call = { kind, state, changed: changed && [...changed].sort() };
    this.calls.push(call);
    this.during?.(call);
    return { kind, objectCount: 0, conntrack: [] };
  }

  async intact(): Promise<boolean> {
    return true;
  }
}

/** The real listeners on 127.0.0.1, counting how often the step asks them to follow a state. */
class CountedHealthChecks extends HealthCheckNodePorts {
  updates = 0;
  constructor() {
    super({ host: '127.0.0.1', proxyHealthy: () => true });
  }
  override update(state: DualStackState) {
    this.updates++;
    return super.update(state);
  }
}

function setup(t: { after(fn: () => Promise<unknown>): void }, roundBudget?: number) {
  const model = new ModelCache(options());
  model.setNode(decoded(node(THIS_NODE, { internalIPs: ['192.168.0.1'] })));
  const dataplane = new FakeDataplane();
  const healthChecks = new CountedHealthChecks();
  t.after(() => healthChecks.close());
  const metrics = new ProxyMetrics('nftables', { processMetrics: false });
  const { logger, lines } = capturedLogger();
  const step = new SyncStep({ model, dataplane, healthChecks, metrics, logger, roundBudget });
  const gauge = async (name: string, labels = '') => {
    const match = new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(
      await metrics.registry.metrics(),
    );
    assert.ok(match, `${name}${labels} is exposed`);
    return Number(match[1]);
  };
  return { model, dataplane, healthChecks, step, lines, gauge };
}

/** A LoadBalancer service with externalTrafficPolicy Local and its health-check node port. */
function lbLocal(name: string, healthCheckNodePort: number, clusterIP: string) {
  return decoded(
    service(name, {
      type: 'LoadBalancer',
      clusterIP,
      externalTrafficPolicy: 'Local',
      healthCheckNodePort,
      ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30000 + (healthCheckNodePort % 2000) }],
    }),
  );
}

async function occupy(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

async function answers(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/`).then(
    () => true,
    () => false,
  );
}

describe('SyncStep', () => {
  test('hands the dataplane the state and the changed service ports, and counts what it holds', async (t) => {
    const { model, dataplane, step, gauge } = setup(t);
    model.setService(decoded(service('web')));
    model.setEndpointSlice(decoded(slice('web', [endpoint('10.244.1.1')])));
    const nodePort = { name: 'http', port: 80, protocol: 'TCP', nodePort: 30081 };
    model.setService(
      decoded(
        service('api', {
          clusterIP: '10.96.0.11',
          type: 'NodePort',
          externalTrafficPolicy: 'Local',
          ports: [nodePort],
        }),
      ),
    );
    model.setEndpointSlice(decoded(slice('api', [endpoint('10.244.2.1')])));
    await step.sync('full');
    assert.deepEqual(dataplane.calls[0]?.changed, undefined, 'a full sync gets no changed set');
    assert.deepEqual([...(dataplane.calls[0]?.state.IPv4?.servicePorts.keys() ?? [])].sort(), [
      'default/api:80/TCP',
      'default/web:80/TCP',
    ]);
    assert.deepEqual(step.summary, { servicePorts: 2, endpoints: 2 });
    // api's external traffic is Local and no endpoint of it is on this node.
    assert.equal(
      await gauge(
        'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
        '{ip_family="IPv4",traffic_policy="external"}',
      ),
      1,
    );

    model.setEndpointSlice(decoded(slice('web', [endpoint('10.244.1.1'), endpoint('10.244.1.2')])));
    model.setEndpointSlice(decoded(slice('api', [endpoint('10.244.2.1', { nodeName: THIS_NODE })])));
    await step.sync('incremental');
    assert.deepEqual(dataplane.calls[1]?.changed, ['default/api:80/TCP', 'default/web:80/TCP']);
    assert.deepEqual(step.summary, { servicePorts: 2, endpoints: 3 });
    assert.equal(
      await gauge(
        'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
        '{ip_family="IPv4",traffic_policy="external"}',
      ),
      0,
    );
  });

  test('logs each problem once while it persists, and again when it comes back', async (t) => {
    const { model, step, lines, gauge } = setup(t);
    const older = decoded(service('first', {}, { created: '2025-01-01T00:00:00Z' }));
    const newer = decoded(service('second', {}, { created: '2026-01-01T00:00:00Z' }));
    const skipped = () => lines.filter((l) => String(l.msg).startsWith('skipped:') && l.level === 40);
    model.setService(older);
    model.setService(newer);
    await step.sync('full');
    assert.equal(skipped().length, 1, 'the conflict is logged');
    assert.equal(skipped()[0]?.object, 'Service default/second');
    assert.equal(await gauge('kproxy_sync_proxy_rules_skipped_problems'), 1);
    await step.sync('incremental');
    assert.equal(skipped().length, 1, 'not again while it persists');
    model.deleteService(newer);
    await step.sync('incremental');
    assert.equal(await gauge('kproxy_sync_proxy_rules_skipped_problems'), 0);
    model.setService(newer);
    await step.sync('incremental');
    assert.equal(skipped().length, 2, 'back: logged again');
  });

  test('updates the health-check listeners only when a change touches them, and retries a port it could not open', async (t) => {
    const { model, healthChecks, step, lines } = setup(t);
    const port = await freePort();
    const blocker = await occupy(port);
    model.setService(lbLocal('lb', port, '10.96.0.20'));
    model.setService(decoded(service('web')));
    await step.sync('full');
    assert.equal(healthChecks.updates, 1, 'a full sync updates them');
    assert.ok(
      lines.some(
        (l) => l.msg === 'cannot open health check node port; retrying on the next sync' && l.port === port,
      ),
    );
    assert.deepEqual(healthChecks.ports, []);

    await new Promise((resolve) => blocker.close(resolve));
    await step.sync('incremental');
    assert.equal(healthChecks.updates, 2, 'retried although nothing changed');
    assert.deepEqual(healthChecks.ports, [port]);
    assert.ok(await answers(port));

    model.setService(decoded(service('web', { clusterIP: '10.96.0.12' })));
    await step.sync('incremental');
    assert.equal(healthChecks.updates, 2, 'a change without a health-check node port leaves them');

    model.deleteService(lbLocal('lb', port, '10.96.0.20'));
    await step.sync('incremental');
    assert.equal(healthChecks.updates, 3, 'a change of a service with one updates them');
    assert.deepEqual(healthChecks.ports, []);
  });

  test('a failed dataplane sync propagates as it was thrown, and what it owed is done by the next sync', async (t) => {
    const { model, dataplane, healthChecks, step } = setup(t);
    await step.sync('full');
    const port = await freePort();
    model.setService(lbLocal('lb', port, '10.96.0.20'));
    for (const error of [
      new TypeError('a bug'),
      new IptablesCommandError('iptables-restore', 'line 3 failed'),
    ]) {
      dataplane.failWith = error;
      await assert.rejects(step.sync('incremental'), (thrown) => thrown === error);
    }
    assert.equal(healthChecks.updates, 1, 'nothing after the failed dataplane sync');
    // The loop retries in full after a failure; the listeners the change asked for follow then.
    await step.sync('full');
    assert.equal(dataplane.calls.at(-1)?.kind, 'full');
    assert.deepEqual(healthChecks.ports, [port]);
  });

  describe('a change over the round budget', () => {
    // hugeService-like: one Service with `ports` ports × `count` endpoints (cost ~ports × count).
    const huge = (ports: number, count: number) => [
      decoded(
        service('huge', {
          clusterIP: '10.96.1.1',
          ports: Array.from({ length: ports }, (_, p) => ({
            name: `p${p}`,
            port: 1000 + p,
            protocol: 'TCP',
          })),
        }),
      ),
      decoded(
        slice(
          'huge',
          Array.from({ length: count }, (_, i) => endpoint(`10.244.3.${i + 1}`)),
          {
            ports: Array.from({ length: ports }, (_, p) => ({
              name: `p${p}`,
              port: 2000 + p,
              protocol: 'TCP',
            })),
          },
        ),
      ),
    ];
    const smallKey = 'default/small:80/TCP';
    const lastHugeKey = 'default/huge:1049/TCP';
    const roundOf = (calls: readonly DataplaneCall[], key: string) =>
      calls.findIndex((call) => call.changed?.includes(key));

    test('is applied in rounds, a small change queued with it first, counts and listeners following each round', async (t) => {
      const { model, dataplane, healthChecks, step } = setup(t, 100);
      await step.sync('full');
      dataplane.calls.length = 0;
      for (const object of huge(50, 10)) {
        if (object.kind === 'Service') model.setService(object);
        else model.setEndpointSlice(object);
      }
      // The small Service has a health-check node port: its listener opens with the first round.
      const port = await freePort();
      model.setService(lbLocal('small', port, '10.96.0.30'));
      model.setEndpointSlice(decoded(slice('small', [endpoint('10.244.9.2')])));
      const counted: number[] = [];
      const listening: number[][] = [];
      dataplane.during = () => {
        counted.push(step.summary.servicePorts);
        listening.push([...healthChecks.ports]);
      };
      const outcome = await step.sync('incremental');
      assert.equal(outcome.kind, 'incremental');
      assert.ok(dataplane.calls.length >= 6, `${dataplane.calls.length} rounds for 50 ports × 11`);
      assert.ok(dataplane.calls.every((call) => call.kind === 'incremental'));
      assert.equal(roundOf(dataplane.calls, smallKey), 0, 'the small Service first');
      assert.equal(roundOf(dataplane.calls, lastHugeKey), dataplane.calls.length - 1);
      assert.deepEqual(listening.slice(0, 2), [[], [port]], 'listening once the first round is applied');
      // Each round's state holds the ports applied so far and nothing else of the huge one.
      let applied = 0;
      for (const [i, call] of dataplane.calls.entries()) {
        applied += call.changed!.length;
        assert.equal(call.state.IPv4?.servicePorts.size, applied, `round ${i}`);
        assert.equal(counted[i], applied, `round ${i}: the counts are the round's state`);
      }
      assert.equal(applied, 51);
    });

    test('a small change that arrives during a round goes in the next round, ahead of the rest', async (t) => {
      const { model, dataplane, step } = setup(t, 100);
      model.setService(decoded(service('small', { clusterIP: '10.96.0.30' })));
      await step.sync('full');
      dataplane.calls.length = 0;
      for (const object of huge(50, 10)) {
        if (object.kind === 'Service') model.setService(object);
        else model.setEndpointSlice(object);
      }
      dataplane.during = () => {
        dataplane.during = undefined;
        model.setEndpointSlice(decoded(slice('small', [endpoint('10.244.9.2')])));
      };
      await step.sync('incremental');
      assert.equal(roundOf(dataplane.calls, smallKey), 1, 'the round after the one it arrived in');
      assert.equal(roundOf(dataplane.calls, lastHugeKey), dataplane.calls.length - 1);
      assert.ok(dataplane.calls.length > 3);
      const last = dataplane.calls.at(-1)!.state.IPv4!;
      assert.deepEqual(
        last.servicePorts.get(smallKey)?.clusterEndpoints.map((e) => e.ip),
        ['10.244.9.2'],
      );
      assert.equal(last.servicePorts.size, 51);
    });

    test('a full update between rounds ends them with one full sync', async (t) => {
      const { model, dataplane, step } = setup(t, 100);
      await step.sync('full');
      dataplane.calls.length = 0;
      for (const object of huge(50, 10)) {
        if (object.kind === 'Service') model.setService(object);
        else model.setEndpointSlice(object);
      }
      dataplane.during = () => {
        dataplane.during = undefined;
        assert.ok(model.setNode(decoded(node(THIS_NODE, { internalIPs: ['192.168.0.1'], zone: 'b' }))));
      };
      const outcome = await step.sync('incremental');
      assert.equal(outcome.kind, 'full');
      assert.deepEqual(
        dataplane.calls.map((call) => call.kind),
        ['incremental', 'full'],
      );
      assert.equal(dataplane.calls[1]?.state.IPv4?.servicePorts.size, 50);
    });
  });
});
