import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sampleService } from '../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../harness/apiserver/server.ts';
import type { Service } from '../../src/kube/objects.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { FileTokenSource } from '../../src/kube/token-source.ts';
import { counterValue, eventually, expectedStore, startTestInformer, storeContents } from './harness.ts';

for (const watchList of [true, false]) {
  describe(`Informer (${watchList ? 'watch-list' : 'list and watch'})`, () => {
    test('syncs from the server, then follows adds, updates and deletes with old and new objects', async (t) => {
      const server = await startApiServer({ bookmarkIntervalMs: 100 });
      for (let i = 0; i < 7; i++) server.state.apply(SERVICES, sampleService('ns', `s${i}`));
      const ti = startTestInformer<Service>(server, SERVICES, { watchList, pageSize: 3 });
      t.after(async () => {
        await ti.close();
        await server.stop();
      });
      await ti.informer.waitForSync();
      assert.ok(ti.informer.hasSynced());
      assert.equal(ti.informer.store.size, 7);
      assert.equal(ti.events.length, 7);

      server.state.apply(SERVICES, sampleService('ns', 's1', { port: 443 }));
      server.state.delete(SERVICES, 'ns', 's2');
      server.state.apply(SERVICES, sampleService('ns', 'new'));
      await eventually(() => assert.deepEqual(storeContents(ti.informer), expectedStore(server, SERVICES)));
      const update = ti.events.find((e) => e.type === 'update');
      assert.ok(update?.type === 'update');
      assert.equal(update.old.spec.ports?.[0]?.port, 80);
      assert.equal(update.object.spec.ports?.[0]?.port, 443);
      assert.deepEqual(
        ti.events.slice(7).map((e) => `${e.type} ${e.object.metadata.name}`),
        ['update s1', 'delete s2', 'add new'],
      );
      // The store holds decoded slim objects, not the API's JSON.
      assert.equal(
        (ti.informer.store.get('ns/s1') as unknown as { apiVersion?: string }).apiVersion,
        undefined,
      );
    });

    test('after history expired while disconnected, a relist applies what it lists, then reports what it did not list as deleted', async (t) => {
      const server = await startApiServer({ bookmarkIntervalMs: 60_000 });
      for (let i = 0; i < 5; i++) server.state.apply(SERVICES, sampleService('ns', `s${i}`));
      const ti = startTestInformer<Service>(server, SERVICES, { watchList });
      t.after(async () => {
        await ti.close();
        await server.stop();
      });
      await ti.informer.waitForSync();
      await eventually(() => assert.equal(server.openWatches, 1));
      // Keep the informer away while objects vanish and the history that recorded it is compacted.
      server.faults.failNext(3, 500);
      server.faults.dropWatches();
      server.state.delete(SERVICES, 'ns', 's3');
      server.state.apply(SERVICES, sampleService('ns', 's4', { port: 99 }));
      server.faults.compact();
      await eventually(() => assert.deepEqual(storeContents(ti.informer), expectedStore(server, SERVICES)));
      assert.deepEqual(
        ti.events.slice(5).map((e) => `${e.type} ${e.object.metadata.name}`),
        ['update s4', 'delete s3'],
      );
      assert.equal(
        await counterValue(ti.registry, 'kproxy_informer_relists_total', { reason: 'expired' }),
        1,
      );
      assert.ok((await counterValue(ti.registry, 'kproxy_informer_errors_total', { reason: 'server' })) >= 1);
    });
  });
}

describe('Informer robustness', () => {
  test('a server without watch-list gets list and watch instead', async (t) => {
    const server = await startApiServer({ watchList: false });
    server.state.apply(SERVICES, sampleService('ns', 'a'));
    const ti = startTestInformer<Service>(server, SERVICES, { watchList: true });
    t.after(async () => {
      await ti.close();
      await server.stop();
    });
    await ti.informer.waitForSync();
    assert.equal(ti.informer.store.size, 1);
    const kinds = server.requests.map((r) =>
      r.query.get('sendInitialEvents') ? 'watch-list' : r.query.get('watch') ? 'watch' : 'list',
    );
    assert.deepEqual(kinds.slice(0, 2), ['watch-list', 'list']);
    await eventually(() =>
      assert.ok(server.requests.some((r) => r.query.get('watch') && !r.query.get('sendInitialEvents'))),
    );
  });

  test('malformed watch lines and invalid objects are logged and counted, and the informer goes on', async (t) => {
    const server = await startApiServer();
    const ti = startTestInformer<Service>(server, SERVICES);
    t.after(async () => {
      await ti.close();
      await server.stop();
    });
    await ti.informer.waitForSync();
    await eventually(() => assert.equal(server.openWatches, 1));
    server.faults.writeToWatches('this is not json\n');
    server.state.apply(SERVICES, sampleService('ns', 'bad', { port: 70000 }));
    server.state.apply(SERVICES, sampleService('ns', 'good'));
    await eventually(() => assert.ok(ti.informer.store.has('ns/good')));
    assert.ok(!ti.informer.store.has('ns/bad'));
    assert.equal(await counterValue(ti.registry, 'kproxy_informer_errors_total', { reason: 'malformed' }), 1);
    assert.equal(await counterValue(ti.registry, 'kproxy_informer_errors_total', { reason: 'invalid' }), 1);
    const invalidLog = ti.log.lines.find((l) => l.msg === 'invalid object skipped');
    assert.match(String(invalidLog?.reason), /spec\.ports\[0\]\.port/);
    // An object that turns invalid leaves the store rather than staying at its last valid version.
    server.state.apply(SERVICES, sampleService('ns', 'good', { port: 0 }));
    await eventually(() => assert.ok(!ti.informer.store.has('ns/good')));
    assert.equal(ti.events.at(-1)?.type, 'delete');
  });

  test('429 with Retry-After waits at least that long before trying again', async (t) => {
    const server = await startApiServer();
    server.faults.failNext(1, 429, 1);
    const ti = startTestInformer<Service>(server, SERVICES);
    t.after(async () => {
      await ti.close();
      await server.stop();
    });
    await ti.informer.waitForSync();
    const retry = ti.log.lines.find((l) => typeof l.error === 'string' && l.error.includes('429'));
    assert.ok(retry, 'the 429 was logged');
    assert.ok(Number(retry.retryInMs) >= 1000, `retried after ${retry.retryInMs} ms`);
    assert.equal(await counterValue(ti.registry, 'kproxy_informer_errors_total', { reason: 'throttled' }), 1);
  });

  test('a rotated service-account token is picked up without restarting the informer', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'kproxy-token-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'old-token');
    const server = await startApiServer({ tokens: ['old-token'] });
    const ti = startTestInformer<Service>(server, SERVICES, {
      connection: { tokenSource: new FileTokenSource(tokenFile, { maxAgeMs: 3_600_000 }) },
    });
    t.after(async () => {
      await ti.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    await ti.informer.waitForSync();
    server.setTokens(['new-token']);
    writeFileSync(tokenFile, 'new-token');
    server.faults.dropWatches();
    server.state.apply(SERVICES, sampleService('ns', 'after-rotation'));
    await eventually(() => assert.ok(ti.informer.store.has('ns/after-rotation')));
    assert.equal(server.requests.at(-1)?.authorization, 'Bearer new-token');
  });

  test('a watch that goes silent past its timeout (half-open connection) is abandoned and resumed', async (t) => {
    const server = await startApiServer();
    const ti = startTestInformer<Service>(server, SERVICES, {
      watchTimeoutSeconds: { min: 1, max: 1 },
      watchGraceMs: 300,
    });
    t.after(async () => {
      await ti.close();
      await server.stop();
    });
    await ti.informer.waitForSync();
    await eventually(() => assert.equal(server.openWatches, 1));
    server.faults.freezeWatches();
    server.state.apply(SERVICES, sampleService('ns', 'while-frozen'));
    await eventually(() => assert.ok(ti.informer.store.has('ns/while-frozen')));
    assert.ok(ti.log.lines.some((l) => String(l.error).includes('connection presumed dead')));
  });

  test('stop() ends the informer promptly even during a backoff', async () => {
    const server = await startApiServer();
    server.faults.failNext(100, 503, 60);
    const ti = startTestInformer<Service>(server, SERVICES);
    await eventually(() => assert.ok(server.requests.length >= 1));
    await ti.close();
    await server.stop();
    assert.ok(!ti.informer.hasSynced());
  });
});
