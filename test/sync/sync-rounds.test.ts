import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hugeService } from '../../bench/synthetic-cluster.ts';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import type { KubeObject } from '../../src/kube/objects.ts';
import { ROUND_BUDGET, roundsBetween, syncRounds } from '../../src/sync/sync-rounds.ts';
import { build, endpoint, service, slice } from '../model/fixtures.ts';

const changedKeys = (prev: DualStackState, next: DualStackState) =>
  new Set([...changedServicePorts(prev.IPv4, next.IPv4), ...changedServicePorts(prev.IPv6, next.IPv6)]);

/** What the splitter charges a port: itself plus its endpoints, the larger of before and after. */
function costOf(prev: DualStackState, next: DualStackState, key: ServicePortKey): number {
  const cost = (state: DualStackState) => {
    const port = state.IPv4?.servicePorts.get(key);
    return port ? 1 + port.clusterEndpoints.length + port.localEndpoints.length : 0;
  };
  return Math.max(cost(prev), cost(next));
}

const small = (ip: string): KubeObject[] => [
  service('small', { clusterIP: '10.96.200.1' }),
  slice('small', [endpoint(ip)]),
];

function endpoints(count: number, base: string): ReturnType<typeof endpoint>[] {
  return Array.from({ length: count }, (_, i) => endpoint(`${base}.${i + 1}`));
}

test('a change that fits the budget is one round, keys in order', () => {
  const prev = build(small('10.244.9.1')).state;
  const next = build([...small('10.244.9.2'), service('other', { clusterIP: '10.96.0.20' })]).state;
  assert.deepEqual(syncRounds(prev, next, changedKeys(prev, next)), [
    ['default/other:80/TCP', 'default/small:80/TCP'],
  ]);
  assert.deepEqual(roundsBetween(prev, next), [
    { keys: ['default/other:80/TCP', 'default/small:80/TCP'], state: next },
  ]);
});

test('a 1,000-port × 100-endpoint Service is split into budget-sized rounds, a small change first', () => {
  const huge = hugeService(1000, 100);
  const prev = build(small('10.244.9.1')).state;
  const next = build([...huge.services, ...huge.endpointSlices, ...small('10.244.9.2')]).state;
  const changed = changedKeys(prev, next);
  assert.equal(changed.size, 1001);
  const rounds = syncRounds(prev, next, changed);
  assert.deepEqual(syncRounds(prev, next, changed), rounds, 'deterministic');
  assert.deepEqual(rounds[0]?.[0], 'default/small:80/TCP', 'the small Service goes in the first round');
  assert.ok(rounds.length >= Math.ceil((1000 * 101) / ROUND_BUDGET), `${rounds.length} rounds`);
  const costs = rounds.map((keys) => keys.map((key) => costOf(prev, next, key)));
  for (const [i, round] of costs.entries()) {
    const total = round.reduce((a, b) => a + b, 0);
    assert.ok(total <= ROUND_BUDGET, `round ${i} changes ${total} endpoints`);
    if (i > 0) assert.ok(Math.max(...costs[i - 1]!) <= Math.min(...round), 'cheaper rounds first');
  }
  const all = rounds.flat();
  assert.equal(new Set(all).size, all.length, 'a port is in one round only');
  assert.deepEqual(new Set(all), changed);
  for (const round of rounds) assert.deepEqual(round, [...round].sort(), 'keys in order within a round');

  // Each state is the one before with that round's ports new, every other port as before.
  const states = roundsBetween(prev, next).map((round) => round.state);
  assert.equal(states.length, rounds.length);
  assert.equal(states.at(-1), next);
  let before = prev;
  for (const [i, state] of states.entries()) {
    assert.deepEqual(
      [...changedKeys(before, state)].sort(),
      [...rounds[i]!].sort(),
      `round ${i} changes exactly its ports`,
    );
    for (const key of rounds[i]!) {
      assert.deepEqual(state.IPv4?.servicePorts.get(key), next.IPv4?.servicePorts.get(key));
    }
    assert.deepEqual([...state.IPv4!.servicePorts.keys()], [...state.IPv4!.servicePorts.keys()].sort());
    before = state;
  }
});

test('a single port over the budget is a round of its own; removals are charged what they remove', () => {
  const big = (name: string, count: number, base: string): KubeObject[] => [
    service(name, { clusterIP: base === '10.244.1' ? '10.96.0.11' : '10.96.0.12' }),
    slice(name, endpoints(count, base)),
  ];
  const prev = build([...big('a', 30, '10.244.1'), ...small('10.244.9.1')]).state;
  const next = build([...big('b', 30, '10.244.2'), ...small('10.244.9.2')]).state;
  assert.deepEqual(syncRounds(prev, next, changedKeys(prev, next), 20), [
    ['default/small:80/TCP'],
    ['default/a:80/TCP'],
    ['default/b:80/TCP'],
  ]);
});

test('ports that hand an address or a node port over go in one round: no state claims it twice', () => {
  const nodePortService = (name: string, nodePort: number, count: number, base: string): KubeObject[] => [
    service(name, {
      type: 'NodePort',
      clusterIP: name === 'a' ? '10.96.0.11' : '10.96.0.12',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort }],
    }),
    slice(name, endpoints(count, base)),
  ];
  // a moves from node port 30000 to 30001 and b, small, takes 30000: b alone first would
  // give a state where both claim 30000.
  const prev = build([...nodePortService('a', 30000, 30, '10.244.1'), ...small('10.244.9.1')]).state;
  const next = build([
    ...nodePortService('a', 30001, 31, '10.244.1'),
    ...nodePortService('b', 30000, 1, '10.244.2'),
    ...small('10.244.9.2'),
  ]).state;
  assert.deepEqual(syncRounds(prev, next, changedKeys(prev, next), 20), [
    ['default/small:80/TCP'],
    ['default/a:80/TCP', 'default/b:80/TCP'],
  ]);
});

test('a change of the node settings is one round whatever its size', () => {
  const huge = hugeService(100, 100);
  const objects = [...huge.services, ...huge.endpointSlices];
  const prev = build([]).state;
  const next = build(objects, { masqueradeAll: true }).state;
  assert.equal(syncRounds(prev, next, changedKeys(prev, next), 100).length, 1);
});
