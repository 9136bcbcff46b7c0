import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EndpointSlice } from '../../src/kube/objects.ts';
import { SharedParts } from '../../src/kube/shared-parts.ts';

function slice(name: string, ready: boolean): EndpointSlice {
  return {
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'ns' },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: [
      { addresses: ['10.0.0.1'], conditions: { ready, serving: true, terminating: false }, nodeName: 'n1' },
      {
        addresses: ['10.0.0.2'],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: 'n2',
      },
    ],
  };
}

test('equal parts of different objects become one frozen instance; the objects read the same', () => {
  const shared = new SharedParts();
  const a = shared.compact(slice('a', true));
  const b = shared.compact(slice('b', false));
  assert.deepEqual(a, slice('a', true));
  assert.deepEqual(b, slice('b', false));
  assert.equal(a.ports, b.ports);
  assert.equal(a.endpoints?.[0]?.conditions, a.endpoints?.[1]?.conditions);
  assert.equal(a.endpoints?.[1]?.conditions, b.endpoints?.[1]?.conditions);
  assert.notEqual(b.endpoints?.[0]?.conditions, b.endpoints?.[1]?.conditions, 'different values stay apart');
  assert.ok(Object.isFrozen(a.ports) && Object.isFrozen(a.ports?.[0]));
  assert.throws(() => {
    (a.endpoints![0]!.conditions as { ready: boolean }).ready = false;
  }, TypeError);
});

test('the table is bounded: past the limit it starts over and sharing still works', () => {
  const shared = new SharedParts(2);
  const values = [['a'], ['b'], ['c'], ['c']].map((v) => shared.share(v));
  assert.equal(values[2], values[3]);
  assert.deepEqual(values, [['a'], ['b'], ['c'], ['c']]);
});
