// The PATCH bodies kubectl sends, applied as kube-apiserver applies them: the cases where a
// strategic merge patch differs from a JSON merge patch, and the directives kubectl apply writes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mergePatch, PatchError, strategicMergePatch } from '../../../harness/apiserver/patch.ts';

const service = {
  metadata: { name: 'web', labels: { app: 'web', tier: 'front' }, finalizers: ['a'] },
  spec: {
    ports: [
      { name: 'http', port: 80, targetPort: 8080 },
      { name: 'https', port: 443, targetPort: 8443 },
    ],
    externalIPs: ['192.0.2.1', '192.0.2.2'],
    selector: { app: 'web' },
  },
};

test('JSON merge patch: maps merge, null deletes, lists are replaced whole', () => {
  assert.deepEqual(
    mergePatch(service, { metadata: { labels: { tier: null, x: 'y' } }, spec: { ports: [{ port: 81 }] } }),
    {
      ...service,
      metadata: { ...service.metadata, labels: { app: 'web', x: 'y' } },
      spec: { ...service.spec, ports: [{ port: 81 }] },
    },
  );
});

test('strategic merge: Service ports merge by port; other lists (externalIPs) are replaced', () => {
  const out = strategicMergePatch('Service', service, {
    spec: { ports: [{ port: 443, targetPort: 9443 }, { port: 8080 }], externalIPs: ['192.0.2.9'] },
  }) as typeof service;
  assert.deepEqual(out.spec.ports, [
    { name: 'http', port: 80, targetPort: 8080 },
    { name: 'https', port: 443, targetPort: 9443 },
    { port: 8080 },
  ]);
  assert.deepEqual(out.spec.externalIPs, ['192.0.2.9']);
});

test('strategic merge: what kubectl apply sends to drop a port and reorder ($patch: delete, $setElementOrder)', () => {
  const out = strategicMergePatch('Service', service, {
    spec: {
      '$setElementOrder/ports': [{ port: 443 }, { port: 8443 }],
      ports: [
        { port: 8443, name: 'alt' },
        { port: 80, $patch: 'delete' },
      ],
    },
  }) as typeof service;
  assert.deepEqual(out.spec.ports, [
    { name: 'https', port: 443, targetPort: 8443 },
    { port: 8443, name: 'alt' },
  ]);
});

test('strategic merge: $patch replace, $retainKeys, primitive merge lists and $deleteFromPrimitiveList', () => {
  const out = strategicMergePatch('Service', service, {
    metadata: { finalizers: ['b'], '$deleteFromPrimitiveList/finalizers': ['a'] },
    spec: { selector: { $patch: 'replace', run: 'web' }, $retainKeys: ['ports', 'selector'] },
  }) as { metadata: { finalizers: string[] }; spec: Record<string, unknown> };
  assert.deepEqual(out.metadata.finalizers, ['b']);
  assert.deepEqual(out.spec, { ports: service.spec.ports, selector: { run: 'web' } });
  assert.throws(
    () => strategicMergePatch('Service', service, { spec: { ports: [{ name: 'x' }] } }),
    PatchError,
  );
});

test('strategic merge: EndpointSlice lists are atomic (replaced), as their API types say', () => {
  const slice = {
    metadata: { name: 's' },
    endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }],
  };
  const out = strategicMergePatch('EndpointSlice', slice, { endpoints: [{ addresses: ['10.0.0.3'] }] });
  assert.deepEqual(out.endpoints, [{ addresses: ['10.0.0.3'] }]);
});
