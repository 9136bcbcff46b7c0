// The daemon's health wiring on a fake clock, against the stand-in API server: the informers and
// the HTTP listeners run for real, but the sync loop and health read the fake clock, so each cause
// of a 503 is checked at the exact health timeout the daemon sets up (2 × syncPeriod, as
// kube-proxy's healthTimeout): 200 a millisecond before it, 503 at it, 200 once the cause goes.
// Only the causes' arrival waits in real time (polled, with eventually's bound).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import type { ApiServerOptions } from '../../harness/apiserver/server.ts';
import { NODES, SERVICES } from '../../src/kube/resources.ts';
import { FakeClock } from '../sync/fake-clock.ts';
import { eventually } from './daemon-harness.ts';
import { startRecordingDaemon } from './recording-daemon.ts';

type After = { after(fn: () => Promise<unknown>): void };

async function run(t: After, apiOptions: ApiServerOptions = {}) {
  const clock = new FakeClock(Date.UTC(2026, 11, 5, 8));
  const { api, config, dataplane, daemon, lines } = await startRecordingDaemon(t, {
    apiOptions,
    clock,
    objects: (api) => {
      api.state.apply(SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
      api.state.apply(NODES, sampleNode('node-1'));
    },
  });
  await eventually('informers synced', () =>
    lines.some((l) => l.msg === 'informers synced; starting the sync loop'),
  );
  await clock.advance(0);
  await eventually('first sync', () => dataplane.syncs.length === 1);
  const codes = async () => [
    (await fetch(`${daemon.healthzUrl}/healthz`)).status,
    (await fetch(`${daemon.healthzUrl}/livez`)).status,
  ];
  const said = (cause: string) =>
    lines.filter((l) => l.cause === cause).map((l) => `${l.level === 40 ? 'warn' : 'info'} ${l.msg}`);
  // kube-proxy's healthTimeout, which the daemon must derive the same way.
  const timeout = 2 * config.syncPeriodMs;
  return { api, clock, dataplane, daemon, lines, codes, said, timeout };
}

describe('daemon health on a fake clock: each cause at the exact timeout', () => {
  test('a change whose syncs keep failing: 200 until 2 x syncPeriod, 503 from it, 200 once synced', async (t) => {
    const r = await run(t);
    r.dataplane.failNext = 1_000;
    const changes = () =>
      r.daemon.metrics.registry.getSingleMetric('kubeproxy_sync_proxy_rules_service_changes_total')?.get();
    const before = (await changes())?.values[0]?.value;
    r.api.state.apply(SERVICES, sampleService('default', 'late', { clusterIP: '10.96.0.30' }));
    await eventually(
      'the change reached the daemon',
      async () => (await changes())?.values[0]?.value !== before,
    );
    // The change was queued at the fake clock's now: it has not moved since.
    await r.clock.advance(r.timeout - 1);
    assert.ok(r.dataplane.failNext < 1_000, 'syncs were tried and failed');
    assert.deepEqual(await r.codes(), [200, 200]);
    await r.clock.advance(1);
    assert.deepEqual(await r.codes(), [503, 503]);
    assert.deepEqual(r.said('unsynced'), [
      `warn /healthz and /livez answer 503: a queued change has not been synced since 2026-12-05T08:00:00.000Z`,
    ]);
    r.dataplane.failNext = 0;
    // A failed sync is retried within syncPeriod (sync-loop.ts caps its backoff there).
    await r.clock.advance(r.timeout / 2);
    assert.deepEqual(await r.codes(), [200, 200]);
    assert.equal(r.said('unsynced').length, 2);
  });

  test('an API server that stops answering: 200 until 2 x syncPeriod, 503 from it, 200 once back', async (t) => {
    const r = await run(t);
    await r.api.stop();
    await eventually('contact lost', () => r.lines.some((l) => l.msg?.toString().startsWith('lost contact')));
    await r.clock.advance(r.timeout - 1);
    assert.deepEqual(await r.codes(), [200, 200]);
    await r.clock.advance(1);
    assert.deepEqual(await r.codes(), [503, 503]);
    assert.equal(r.said('api-server').length, 1);
    assert.match(
      r.said('api-server')[0] ?? '',
      /^warn \/healthz and \/livez answer 503: the API server has not been followed since 2026-12-05T08:00:00.000Z \(/,
    );
    await r.api.start();
    await eventually('contact regained', async () => (await r.codes()).join() === '200,200');
    assert.equal(r.said('api-server').length, 2);
  });

  test('a node tainted for scale-down: /healthz 503 at once, /livez 200 throughout, 200 once untainted', async (t) => {
    const r = await run(t);
    const node = sampleNode('node-1');
    (node.spec as Record<string, unknown>).taints = [
      { key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' },
    ];
    r.api.state.apply(NODES, node);
    await eventually('healthz 503', async () => (await r.codes()).join() === '503,200');
    await r.clock.advance(10 * r.timeout);
    assert.deepEqual(await r.codes(), [503, 200]);
    r.api.state.apply(NODES, sampleNode('node-1'));
    await eventually('healthz 200', async () => (await r.codes()).join() === '200,200');
    assert.deepEqual(r.said('node'), [
      'warn /healthz answer 503: node node-1 is tainted ToBeDeletedByClusterAutoscaler',
      'info /healthz no longer 503 for: node node-1 is tainted ToBeDeletedByClusterAutoscaler',
    ]);
  });

  for (const [code, apiOptions] of [
    [404, { unserved: ['servicecidrs'] }],
    [403, { forbidden: ['servicecidrs'] }],
  ] as const) {
    test(`ServiceCIDRs answered ${code} at every retry, far past the timeout: 200 throughout`, async (t) => {
      const r = await run(t, apiOptions);
      const asked = () => r.api.requests.filter((q) => q.path.endsWith('/servicecidrs')).length;
      // Each round: more refusals arrive, then the fake clock passes a whole timeout.
      for (let round = 0; round < 3; round++) {
        const seen = asked();
        await eventually(`another ${code}`, () => asked() >= seen + 2);
        await r.clock.advance(r.timeout);
        assert.deepEqual(await r.codes(), [200, 200], `round ${round}`);
      }
      assert.ok(
        !r.lines.some(
          (l) =>
            l.cause !== undefined || l.msg === 'lost contact with the API server; rules stay as they are',
        ),
      );
    });
  }
});
