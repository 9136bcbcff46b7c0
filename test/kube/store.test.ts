import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeObject } from '../../src/kube/objects.ts';
import { VersionStore } from '../../src/kube/store.ts';

function slice(name: string, resourceVersion: string | undefined): KubeObject {
  return { kind: 'EndpointSlice', metadata: { namespace: 'ns', name, resourceVersion } } as KubeObject;
}

test('VersionStore gives back each resourceVersion exactly, whether kept as a number or as it came', () => {
  const store = new VersionStore('EndpointSlice');
  // Canonical small decimals (kept as numbers) and what must stay text: leading zeros, too many
  // digits for a small integer, anything not decimal, none.
  const versions = ['0', '7', '123456789', '007', '1234567890', '99999999999999999999', '12a', '-1', ''];
  for (const [i, rv] of versions.entries())
    assert.equal(store.set(`ns/s${i}`, slice(`s${i}`, rv)), undefined);
  for (const [i, rv] of versions.entries()) {
    assert.deepEqual(store.get(`ns/s${i}`), {
      kind: 'EndpointSlice',
      metadata: { namespace: 'ns', name: `s${i}`, resourceVersion: rv },
    });
  }
  // set and delete return the head kept before, with its version as it came.
  assert.equal(store.set('ns/s3', slice('s3', '8'))?.metadata.resourceVersion, '007');
  assert.equal(store.get('ns/s3')?.metadata.resourceVersion, '8');
  assert.equal(store.delete('ns/s4')?.metadata.resourceVersion, '1234567890');
  assert.equal(store.set('ns/none', slice('none', undefined)), undefined);
  assert.equal(store.get('ns/none')?.metadata.resourceVersion, '');
});

test('VersionStore keeps the string keyOf gives for a key it does not hold yet, and asks for it once', () => {
  const asked: string[] = [];
  // A consumer's equal string, told apart here by a marker only a real keyOf would not add.
  const store = new VersionStore('EndpointSlice', (key) => {
    asked.push(key);
    return `${key}#consumer`;
  });
  store.set('ns/a', slice('a', '1'));
  store.set('ns/a#consumer', slice('a', '2'));
  assert.deepEqual(asked, ['ns/a']);
  assert.deepEqual([...store.keys()], ['ns/a#consumer']);
  assert.equal(store.get('ns/a#consumer')?.metadata.resourceVersion, '2');
  store.delete('ns/a#consumer');
  store.set('ns/a', slice('a', '3'));
  assert.deepEqual(asked, ['ns/a', 'ns/a']);
});
