// Items no API server should send (null, numbers, lists, objects with a null metadata) in a list page
// and in watch events: each is logged, counted and skipped, and the informer syncs the rest.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { sampleService } from '../../harness/apiserver/sample-objects.ts';
import type { KubeApi, ListPage, WatchItem } from '../../src/kube/client.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import { Informer } from '../../src/kube/informer.ts';
import { createInformerMetrics } from '../../src/kube/informer-metrics.ts';
import type { Service } from '../../src/kube/objects.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { capturedLogger } from '../support/captured-logger.ts';
import { counterValue, eventually } from './harness.ts';

const BAD_ITEMS: readonly unknown[] = [null, 5, 'text', [], { metadata: null }, { metadata: 'x' }];

/** A server that lists `items` once, then sends `events` on one watch that stays open. */
function fakeApi(items: readonly unknown[], events: readonly WatchItem[]): KubeApi {
  return {
    list: async () => ({ ok: true, value: { resourceVersion: '1', items } satisfies ListPage }),
    watch: async (_resource, _params, signal) => ({
      ok: true,
      value: (async function* () {
        yield* events;
        await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
      })(),
    }),
  };
}

test('bad list items and watch objects are logged, counted as invalid and skipped; the rest syncs', async (t) => {
  const events: WatchItem[] = [
    ...BAD_ITEMS.filter((item) => typeof item === 'object' && item !== null).map(
      (object): WatchItem => ({ kind: 'event', type: 'ADDED', object }),
    ),
    { kind: 'event', type: 'ADDED', object: sampleService('ns', 'watched') },
  ];
  const registry = new Registry();
  const log = capturedLogger();
  const informer = new Informer<Service>({
    api: fakeApi([...BAD_ITEMS, sampleService('ns', 'listed')], events),
    resource: SERVICES,
    decode: decodeObject,
    logger: log.logger,
    metrics: createInformerMetrics(registry),
    watchList: false,
  });
  informer.start();
  t.after(() => informer.stop());
  await informer.waitForSync();
  await eventually(() => assert.ok(informer.store.has('ns/watched')));
  assert.deepEqual(
    informer.store
      .list()
      .map((s) => s.metadata.name)
      .sort(),
    ['listed', 'watched'],
  );
  const invalid = await counterValue(registry, 'kproxy_informer_errors_total', { reason: 'invalid' });
  assert.equal(invalid, BAD_ITEMS.length + events.length - 1);
  assert.ok(log.lines.filter((line) => line.msg === 'invalid object skipped').length >= BAD_ITEMS.length);
});
