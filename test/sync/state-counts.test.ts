import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { StateCounter } from '../../src/sync/state-counts.ts';
import { endpoint, options, service, slice, THIS_NODE } from '../model/fixtures.ts';

function recount(state: DualStackState) {
  let servicePorts = 0;
  let endpoints = 0;
  for (const family of [state.IPv4, state.IPv6]) {
    for (const port of family?.servicePorts.values() ?? []) {
      servicePorts++;
      endpoints += port.clusterEndpoints.length;
    }
  }
  return { servicePorts, endpoints, noLocal: new StateCounter().update(state).noLocal };
}

describe('StateCounter', () => {
  it('keeps the counts of a full walk while fed only the changed service ports', () => {
    const cache = new ModelCache(options());
    const counter = new StateCounter();
    const names = ['a', 'b', 'c', 'd'];
    let seed = 7;
    const pick = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let step = 0; step < 200; step++) {
      const name = names[pick(names.length)]!;
      const what = pick(4);
      if (what === 0) {
        cache.setService(
          service(name, {
            type: 'NodePort',
            ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 + names.indexOf(name) }],
            ...(pick(2) === 0 && { externalTrafficPolicy: 'Local' }),
            ...(pick(2) === 0 && { internalTrafficPolicy: 'Local' }),
          }),
        );
      } else if (what === 1) {
        cache.deleteService(service(name));
      } else {
        const eps = Array.from({ length: pick(4) }, (_, i) =>
          endpoint(`10.244.1.${i + 1}`, { nodeName: pick(2) === 0 ? THIS_NODE : 'node-2' }),
        );
        cache.setEndpointSlice(slice(name, eps));
      }
      const update = cache.update();
      const counts = counter.update(update.state, update.full ? undefined : update.changed);
      assert.deepEqual(counts, recount(update.state), `step ${step}`);
    }
  });
});
