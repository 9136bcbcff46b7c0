// Property: no cluster data makes the model or a planner throw. Random object sets full of
// conflicts (shared and re-spelled cluster IPs, external and LoadBalancer IPs equal to other
// Services' cluster IPs, shared node ports, unknown fields, rejected values) go through decode,
// buildProxyState and the ModelCache (which must agree, step by step), and every state they give is
// conflict-free and planned, in full and incrementally, by all three planners. The kernel half is
// test/dataplanes/conflicts-kernel.test.ts.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/model/conflicts-property.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { DualStackState, ProxyState } from '../../contract/proxy-state.ts';
import { iptablesPlanner } from '../../dataplanes/iptables/planner.ts';
import { ipvsPlanner } from '../../dataplanes/ipvs/planner.ts';
import { nftablesPlanner } from '../../dataplanes/nftables/planner.ts';
import { buildProxyState } from '../../src/model/build-state.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';
import { CLUSTER_OPTIONS, type RandomCluster, randomCluster } from './random-cluster.ts';

const PLANNERS: readonly DataplanePlanner<unknown>[] = [nftablesPlanner, iptablesPlanner, ipvsPlanner];
const STEPS = 5;

/** Every address:port/protocol and node port/protocol a state serves: none may appear twice. */
export function assertConflictFree(state: DualStackState, where: string): void {
  for (const family of ['IPv4', 'IPv6'] as const) {
    const owners = new Map<string, string>();
    const claim = (what: string, key: string) => {
      const other = owners.get(what);
      assert.equal(other, undefined, `${where}, ${family}: ${what} served by ${other} and ${key}`);
      owners.set(what, key);
    };
    for (const sp of state[family]?.servicePorts.values() ?? []) {
      const vips = [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].filter((ip) => ip !== '');
      for (const ip of vips) claim(`${ip} ${sp.port}/${sp.protocol}`, sp.key);
      if (sp.nodePort !== 0) claim(`node port ${sp.nodePort}/${sp.protocol}`, sp.key);
    }
  }
}

function keyOf(object: {
  readonly metadata: { readonly namespace?: string; readonly name: string };
}): string {
  return `${object.metadata.namespace ?? 'default'}/${object.metadata.name}`;
}

/** Feeds the cache the difference between two clusters, as informer events would. */
function feed(cache: ModelCache, before: RandomCluster | undefined, after: RandomCluster): void {
  const services = new Set(after.services.map(keyOf));
  const slices = new Set(after.endpointSlices.map(keyOf));
  for (const service of before?.services ?? [])
    if (!services.has(keyOf(service))) cache.deleteService(service);
  for (const slice of before?.endpointSlices ?? [])
    if (!slices.has(keyOf(slice))) cache.deleteEndpointSlice(slice);
  for (const service of after.services) cache.setService(service);
  for (const slice of after.endpointSlices) cache.setEndpointSlice(slice);
}

function plain(state: DualStackState): unknown {
  const family = (s: ProxyState | undefined) => s && { node: s.node, servicePorts: [...s.servicePorts] };
  return { IPv4: family(state.IPv4), IPv6: family(state.IPv6) };
}

test('random conflicting clusters: the model resolves every conflict, agrees with itself, and no planner throws', () => {
  const seeds = testSeeds({ count: 40 });
  process.stdout.write(seedsLine('conflicts property', seeds));
  let conflicts = 0;
  let rejected = 0;
  for (const seed of seeds) {
    const random = prng(seed);
    const cache = new ModelCache(CLUSTER_OPTIONS);
    let cluster: RandomCluster | undefined;
    let prev: DualStackState = {};
    for (let step = 0; step < STEPS; step++) {
      const where = `seed ${seed}, step ${step}`;
      // A step keeps some Services as they were and draws the rest anew.
      const next = randomCluster(random);
      const kept = cluster?.services.filter(() => random() < 0.5) ?? [];
      const keptKeys = new Set(kept.map(keyOf));
      const merged: RandomCluster = {
        services: [...kept, ...next.services.filter((s) => !keptKeys.has(keyOf(s)))],
        endpointSlices: next.endpointSlices,
        rejected: next.rejected,
      };
      feed(cache, cluster, merged);
      cluster = merged;
      rejected += merged.rejected;
      const expected = buildProxyState(merged, CLUSTER_OPTIONS);
      const update = cache.update();
      assert.deepEqual(plain(update.state), plain(expected.state), where);
      const changed = new Set([
        ...changedServicePorts(prev.IPv4, expected.state.IPv4),
        ...changedServicePorts(prev.IPv6, expected.state.IPv6),
      ]);
      assert.deepEqual([...update.changed].sort(), [...changed].sort(), `${where}: changed`);
      assertConflictFree(expected.state, where);
      conflicts += expected.problems.filter((p) => p.reason.endsWith('goes without it')).length;
      for (const planner of PLANNERS) {
        try {
          planner.render(planner.planFull(update.state));
          planner.render(planner.planIncremental(prev, update.state));
        } catch (error) {
          assert.fail(`${where}, ${planner.mode}: ${(error as Error).stack}`);
        }
      }
      prev = update.state;
    }
  }
  // The generator is worth running only if it makes conflicts (and the odd rejected object).
  assert.ok(conflicts > seeds.length * STEPS, `conflicts resolved: ${conflicts}`);
  assert.ok(rejected > 0, `objects rejected: ${rejected}`);
});
