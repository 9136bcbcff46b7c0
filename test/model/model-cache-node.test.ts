import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeObject } from '../../src/kube/decode.ts';
import type { KubeObject, Node } from '../../src/kube/objects.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { endpoint, node, options, service, slice, THIS_NODE } from './fixtures.ts';

function decoded<T extends KubeObject>(raw: T): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') assert.fail(`fixture does not decode: ${JSON.stringify(result)}`);
  return result.object as T;
}

const thisNode = (extra: Parameters<typeof node>[1] = {}, more: Partial<Node['metadata']> = {}) => {
  const raw = node(THIS_NODE, { internalIPs: ['192.168.0.1'], podCIDRs: ['10.244.0.0/24'], ...extra });
  return decoded({ ...raw, metadata: { ...raw.metadata, ...more } });
};

/** A model that has published a state with `first` as its node. */
function modelWith(first: Node): ModelCache {
  const cache = new ModelCache(options({ nodeIPs: [], detectLocalMode: 'NodeCIDR' }));
  cache.setService(decoded(service('web')));
  cache.setEndpointSlice(decoded(slice('web', [endpoint('10.244.1.1')])));
  cache.setNode(first);
  cache.update();
  return cache;
}

describe('ModelCache.setNode', () => {
  it('says a heartbeat (new resourceVersion, other labels) changes nothing, and the next update is not full', () => {
    const cache = modelWith(thisNode({}, { resourceVersion: '1' }));
    const heartbeat = thisNode({}, { resourceVersion: '2', labels: { 'kubernetes.io/os': 'linux' } });
    assert.equal(cache.setNode(heartbeat), false);
    const next = cache.update();
    assert.equal(next.full, false);
    assert.equal(next.changed.size, 0);
  });

  for (const [what, changed] of [
    ['its topology zone', thisNode({ zone: 'zone-b' })],
    ['its InternalIP', thisNode({ internalIPs: ['192.168.0.2'] })],
    ['its pod CIDRs (NodeCIDR local-traffic detection)', thisNode({ podCIDRs: ['10.244.7.0/24'] })],
    ['its deletion', undefined],
  ] as const) {
    it(`says ${what} changes what the model derives, and the next update is full`, () => {
      const cache = modelWith(thisNode());
      assert.equal(cache.setNode(changed), true);
      assert.equal(cache.update().full, true);
    });
  }

  it('says the first Node changes what the model had assumed without one', () => {
    const cache = new ModelCache(options({ nodeIPs: [] }));
    cache.update();
    assert.equal(cache.setNode(thisNode()), true);
  });
});
