import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import { LayeredPortMap } from '../../contract/layered-port-map.ts';
import type { ProxyState, ServicePort } from '../../contract/proxy-state.ts';

function port(key: string, version: number): ServicePort {
  return { key, port: version } as unknown as ServicePort;
}

function stateOf(servicePorts: ReadonlyMap<string, ServicePort>): ProxyState {
  return { family: 'IPv4', node: {} as ProxyState['node'], servicePorts };
}

describe('LayeredPortMap', () => {
  it('behaves like a plain map in key order through long random change sequences, across folds', () => {
    let next = 1;
    const random = () => {
      next = (next * 1103515245 + 12345) % 2 ** 31;
      return next;
    };
    const keys = Array.from({ length: 300 }, (_, i) => `ns/svc${i}:80/TCP`);
    const model = new Map<string, ServicePort>();
    for (const key of keys.slice(0, 150)) model.set(key, port(key, 0));
    let map: ReadonlyMap<string, ServicePort> = new Map([...model].sort(([a], [b]) => (a < b ? -1 : 1)));
    for (let step = 0; step < 3000; step++) {
      const updates = new Map<string, ServicePort | undefined>();
      for (let n = random() % 3; n >= 0; n--) {
        const key = keys[random() % keys.length]!;
        const value = random() % 3 === 0 ? undefined : port(key, step);
        updates.set(key, value);
        if (value === undefined) model.delete(key);
        else model.set(key, value);
      }
      const prev = map;
      const prevEntries = [...prev];
      map = LayeredPortMap.next(prev, updates);
      const expected = [...model].sort(([a], [b]) => (a < b ? -1 : 1));
      assert.deepEqual([...map], expected, `step ${step}`);
      assert.deepEqual([...prev], prevEntries, `step ${step}: the previous map changed`);
      assert.equal(map.size, expected.length);
      assert.deepEqual(
        [...map.keys()],
        expected.map(([key]) => key),
      );
      assert.deepEqual(
        [...map.values()],
        expected.map(([, value]) => value),
      );
      for (const key of keys.slice(0, 20)) {
        assert.equal(map.get(key), model.get(key));
        assert.equal(map.has(key), model.has(key));
      }
      const changed = [...changedServicePorts(stateOf(prev), stateOf(map))].sort();
      const truth = [...updates.keys()].filter((key) => prev.get(key) !== map.get(key)).sort();
      assert.deepEqual(changed, truth, `step ${step}: changed`);
    }
    assert.ok(!(map instanceof LayeredPortMap) || map.changes.size <= 1024);
  });

  it('folds its changes into a plain map once they pass the bound', () => {
    let map: ReadonlyMap<string, ServicePort> = new Map();
    for (let i = 0; i < 1025; i++) {
      assert.ok(!(map instanceof Map) || i === 0, `folded early, after ${i} changes`);
      const key = `ns/svc${String(i).padStart(5, '0')}:80/TCP`;
      map = LayeredPortMap.next(map, new Map([[key, port(key, 0)]]));
    }
    assert.ok(map instanceof Map, 'still layered after 1025 changes');
    assert.equal(map.size, 1025);
  });
});
