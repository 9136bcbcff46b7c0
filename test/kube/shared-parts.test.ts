import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EndpointSlice, Service } from '../../src/kube/objects.ts';
import { SharedParts } from '../../src/kube/shared-parts.ts';

function slice(name: string, zone: string): EndpointSlice {
  return {
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'ns' },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: [
      { addresses: ['10.0.0.1'], hints: { forZones: [{ name: zone }] }, nodeName: 'n1' },
      { addresses: ['10.0.0.2'], hints: { forZones: [{ name: 'zone-a' }] }, nodeName: 'n2' },
    ],
  };
}

function service(name: string): Service {
  return {
    kind: 'Service',
    metadata: { name, namespace: 'ns' },
    spec: {
      clusterIP: '10.96.0.1',
      ipFamilies: ['IPv4'],
      ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
    },
  };
}

test('equal kept parts of different objects become one frozen instance; the objects read the same', () => {
  const shared = new SharedParts();
  const a = shared.compact(slice('a', 'zone-a'));
  const b = shared.compact(slice('b', 'zone-b'));
  assert.deepEqual(a, slice('a', 'zone-a'));
  assert.deepEqual(b, slice('b', 'zone-b'));
  assert.equal(a.endpoints?.[0]?.hints, a.endpoints?.[1]?.hints);
  assert.equal(a.endpoints?.[1]?.hints, b.endpoints?.[1]?.hints);
  assert.notEqual(b.endpoints?.[0]?.hints, b.endpoints?.[1]?.hints, 'different values stay apart');
  assert.ok(Object.isFrozen(a.endpoints?.[0]?.hints?.forZones?.[0]));
  assert.throws(() => {
    (a.endpoints![0]!.hints!.forZones![0] as { name: string }).name = 'zone-c';
  }, TypeError);

  const s1 = shared.compact(service('s1'));
  const s2 = shared.compact(service('s2'));
  assert.deepEqual(s1, service('s1'));
  assert.equal(s1.spec.ports, s2.spec.ports);
  assert.equal(s1.spec.ipFamilies, s2.spec.ipFamilies);
});

test('a slice without hints is kept as it is: the model does not keep its endpoints', () => {
  const shared = new SharedParts();
  const plain: EndpointSlice = { ...slice('a', 'zone-a'), endpoints: [{ addresses: ['10.0.0.1'] }] };
  assert.equal(shared.compact(plain), plain);
});

test('the table is bounded: past the limit it starts over and sharing still works', () => {
  const shared = new SharedParts(2);
  const values = [['a'], ['b'], ['c'], ['c']].map((v) => shared.share(v));
  assert.equal(values[2], values[3]);
  assert.deepEqual(values, [['a'], ['b'], ['c'], ['c']]);
});
