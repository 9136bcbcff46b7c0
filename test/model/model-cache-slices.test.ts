// ModelCache.updateInSlices: the daemon's update, computed in slices with the event loop running
// in between (informer events arrive meanwhile). It must publish what update() would, and never
// lose a change fed while it pauses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Service } from '../../src/kube/objects.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { endpoint, node, options, service, slice, THIS_NODE } from './fixtures.ts';

const SERVICES = 200;

function web(i: number, clusterIP = `10.96.${i >> 8}.${i & 255}`): Service {
  return service(`web-${i}`, { clusterIP });
}

function loaded(): ModelCache {
  const model = new ModelCache(options());
  for (let i = 0; i < SERVICES; i++) {
    model.setService(web(i));
    model.setEndpointSlice(slice(`web-${i}`, [endpoint(`10.244.${i >> 8}.${i & 255}`)]));
  }
  model.setNode(node(THIS_NODE));
  return model;
}

describe('ModelCache in slices', () => {
  it('publishes the state update() publishes', async () => {
    const sliced = await loaded().updateInSlices(0);
    const straight = loaded().update();
    assert.deepEqual(sliced.state, straight.state);
    assert.deepEqual(sliced.changed, straight.changed);
    assert.equal(sliced.full, true);
  });

  it('keeps a change fed while it pauses for the next update', async () => {
    const model = loaded();
    // A changed Service arrives on every turn of the event loop while the update runs (slices of
    // 0 ms give the event loop a turn after every step): the last ones come after the update took
    // what it recomputes, whichever of its steps pause.
    let fed = 0;
    let updating = true;
    const feed = () => {
      if (!updating) return;
      fed++;
      model.setService(web(0, `10.96.${200 + (fed >> 8)}.${fed & 255}`));
      setImmediate(feed);
    };
    setImmediate(feed);
    const first = await model.updateInSlices(0);
    updating = false;
    const second = model.update();
    const last = `10.96.${200 + (fed >> 8)}.${fed & 255}`;
    assert.equal(first.state.IPv4?.servicePorts.size, SERVICES);
    assert.notEqual(first.state.IPv4?.servicePorts.get('default/web-0:80/TCP')?.clusterIP, last);
    assert.deepEqual([...second.changed], ['default/web-0:80/TCP']);
    assert.equal(second.state.IPv4?.servicePorts.get('default/web-0:80/TCP')?.clusterIP, last);
  });

  it('keeps a node change fed while a full update pauses for the next update', async () => {
    const model = loaded();
    setImmediate(() => model.setNode(node(THIS_NODE, { zone: 'z2' })));
    assert.equal((await model.updateInSlices(0)).full, true);
    assert.equal(model.update().full, true);
  });
});
