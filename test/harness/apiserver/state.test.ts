// The stand-in keeps each object encoded (StoredRecord): what it sends must be the bytes
// JSON.stringify gives the object, and what it hands out decoded must be a copy.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../../harness/apiserver/server.ts';
import { ClusterState, StoredRecord } from '../../../harness/apiserver/state.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../../src/kube/resources.ts';

const service = {
  metadata: {
    name: 'wide-ünïcode',
    namespace: 'ns',
    labels: { team: 'café ☕' },
    resourceVersion: '7',
    uid: 'u-1',
  },
  spec: { type: 'ClusterIP', ports: [{ port: 80, protocol: 'TCP' }] },
};

test('a record is the object with its kind first, a list item without it, and decodes to a copy', () => {
  const record = new StoredRecord(SERVICES, service);
  assert.equal(
    record.json.toString(),
    JSON.stringify({ kind: SERVICES.kind, apiVersion: SERVICES.apiVersion, ...service }),
  );
  // A list's item: the same bytes without kind and apiVersion (multi-byte characters kept whole).
  assert.equal(Buffer.concat(record.listItem()).toString(), JSON.stringify(service));
  const decoded = record.object();
  assert.deepEqual(decoded, service);
  assert.notEqual(decoded, record.object());
  assert.deepEqual(record.metadata, {
    name: 'wide-ünïcode',
    namespace: 'ns',
    labels: { team: 'café ☕' },
    resourceVersion: '7',
    uid: 'u-1',
  });
});

test('get hands out a copy: changing it changes nothing stored', () => {
  const state = new ClusterState();
  assert.ok(state.apply(SERVICES, sampleService('ns', 'web')).ok);
  const clusterIP = () => state.get(SERVICES, 'ns', 'web')?.spec as { clusterIP: string };
  const before = clusterIP().clusterIP;
  const got = state.get(SERVICES, 'ns', 'web')!;
  (got.spec as { clusterIP: string }).clusterIP = '10.0.0.99';
  assert.equal(clusterIP().clusterIP, before);
});

test('a deletion records the object as it was, at the deletion’s resourceVersion', () => {
  const state = new ClusterState();
  const created = state.apply(SERVICES, sampleService('ns', 'web'));
  assert.ok(created.ok);
  const changes: unknown[] = [];
  state.subscribe((change) => changes.push(change.record.object()));
  const deleted = state.delete(SERVICES, 'ns', 'web');
  assert.ok(deleted.ok);
  const object = created.record.object();
  assert.deepEqual(changes, [
    { ...object, metadata: { ...object.metadata, resourceVersion: String(state.resourceVersion) } },
  ]);
});

test('lists, GETs and watch events are the JSON of what is stored, byte for byte', async (t) => {
  const api = await startApiServer();
  t.after(() => api.stop());
  for (const name of ['a', 'b', 'c']) {
    api.state.apply(SERVICES, sampleService('ns', name, { labels: { app: `ü-${name}` } }));
    api.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('ns', `${name}-1`, { service: name }));
  }
  const text = async (path: string) => (await fetch(`${api.url}${path}`)).text();
  const items = ['a', 'b', 'c'].map((name) => api.state.get(SERVICES, 'ns', name));
  const rv = String(api.state.resourceVersion);

  const list = await text('/api/v1/namespaces/ns/services');
  assert.equal(
    list,
    JSON.stringify({ kind: 'ServiceList', apiVersion: 'v1', metadata: { resourceVersion: rv }, items }),
  );
  const empty = await text('/api/v1/namespaces/other/services');
  assert.equal(
    empty,
    JSON.stringify({ kind: 'ServiceList', apiVersion: 'v1', metadata: { resourceVersion: rv }, items: [] }),
  );
  const page = JSON.parse(await text('/api/v1/services?limit=2')) as { items: unknown[] };
  assert.deepEqual(page.items, items.slice(0, 2));
  assert.equal(
    await text('/api/v1/namespaces/ns/services/b'),
    JSON.stringify({ kind: 'Service', apiVersion: 'v1', ...items[1] }),
  );

  const watch = await fetch(
    `${api.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=0`,
  );
  const reader = watch.body!.getReader();
  let received = '';
  while (received.split('\n').length <= 3) received += Buffer.from((await reader.read()).value!).toString();
  await reader.cancel();
  const slices = ['a-1', 'b-1', 'c-1'].map((name) => api.state.get(ENDPOINT_SLICES, 'ns', name));
  assert.equal(
    received,
    slices
      .map(
        (object) =>
          `${JSON.stringify({ type: 'ADDED', object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', ...object } })}\n`,
      )
      .join(''),
  );
});
