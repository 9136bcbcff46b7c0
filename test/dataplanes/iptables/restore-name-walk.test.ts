// iptables-nft-restore --noflush (1.8.9, nft-cache.c: cache_chain_list_insert) keeps the name of
// every chain an input mentions — each `:CHAIN` line, each rule's chain and its -j/-g target — in a
// sorted linked list, walked from the head on each mention until a name not smaller. A chain with
// n jumps to chains that sort before it walked past all of them on each of its own rules: O(n²),
// and one Service with 100,000 endpoints never finished its restore (SVC → SEP: 'E' < 'V'; 20,000
// endpoints: 9.9 s against 1.2 s once the endpoint chains sort after it and its jumps come in
// descending order, docs/benchmarks-log.md). The walk is counted here on the restore inputs kproxy
// sends, so a plan that brings the quadratic walk back fails in milliseconds, without a kernel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadedModel } from '../../../bench/bench-model.ts';
import { changedSlice, shapedCluster } from '../../../bench/synthetic-cluster.ts';
import type { FamilyPlan } from '../../../dataplanes/iptables/plan-types.ts';
import { planFamilyFull, planFamilyIncremental } from '../../../dataplanes/iptables/planner.ts';
import { restoreParts } from '../../../dataplanes/iptables/restore-chunks.ts';
import { restoreInput } from '../../../dataplanes/iptables/restore-plan.ts';

/** List nodes iptables-nft-restore visits for the chain names `input` mentions, per line. */
function nameWalkPerLine(input: string): number {
  let names: string[] = [];
  let steps = 0;
  const mention = (name: string) => {
    // The walk visits every smaller name and stops at the first one not smaller (or the end).
    let low = 0;
    let high = names.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (names[mid]! < name) low = mid + 1;
      else high = mid;
    }
    steps += low + 1;
    if (names[low] !== name) names.splice(low, 0, name);
  };
  for (const line of input.split('\n')) {
    if (line.startsWith('*')) names = [];
    else if (line.startsWith(':')) mention(line.slice(1).split(' ')[0]!);
    else if (line.startsWith('-')) {
      const words = line.split(' ');
      mention(words[1]!);
      const jump = words.findIndex((w) => w === '-j' || w === '-g');
      if (jump > 0) mention(words[jump + 1]!);
    }
  }
  const lines = input.split('\n');
  return steps / lines.length;
}

/** Chains per restore part here: small, so that a walk proportional to the endpoints stands out. */
const MAX_CHAINS = 100;

/** The most steps per line over the restore parts iptables-nft gets for `plan`. */
function worstPartWalk(plan: FamilyPlan): number {
  return Math.max(...restoreParts(plan, MAX_CHAINS).map((part) => nameWalkPerLine(restoreInput(part))));
}

// Not with ClientIP affinity: its checks name each endpoint chain a second time, which stays
// quadratic here but is outweighed by the kernel's xt_recent (service-port-rules.ts, endpointChoiceRules).
test('the iptables-nft restore parts of a 5,000-endpoint Service walk their chain-name lists as far per line as a part is large', () => {
  const shape = { services: 1, endpointsPerService: 5000, wide: true };
  const model = loadedModel(shapedCluster(shape));
  const before = model.update().state.IPv4!;
  model.setEndpointSlice(changedSlice(shape, 1));
  const after = model.update().state.IPv4!;
  // Past the names a part declares (fewer than MAX_CHAINS per line on average), a walk may pass all
  // of a part's names once in a while (an extension target such as MARK sorts after KPROXY-*). The
  // quadratic walk: ~2,500 steps per line in the SVC chain's part (each of its 5,000 rules walking
  // past the endpoint chains mentioned so far).
  const full = worstPartWalk(planFamilyFull(before));
  assert.ok(full <= MAX_CHAINS, `full sync: ${full.toFixed(1)} steps per line`);
  const change = worstPartWalk(planFamilyIncremental(before, after)!);
  assert.ok(change <= MAX_CHAINS, `one endpoint change: ${change.toFixed(1)} steps per line`);
});

test('the iptables-nft restore parts of 1,000 services walk their chain-name lists as far per line as a part is large, and so does adding one', () => {
  // KPROXY-SERVICES jumps to every SVC chain in the last part of a full sync (and in any sync that
  // adds or removes a service): in service order each jump walked past half the SVC chains named
  // before it, ~250 steps per line here (10,000 services: 25M steps, ~0.5 s of iptables-nft's time).
  const shape = { services: 1000, endpointsPerService: 2, wide: false };
  const cluster = shapedCluster(shape);
  const model = loadedModel({ ...cluster, services: cluster.services.slice(1) });
  const before = model.update().state.IPv4!;
  model.setService(cluster.services[0]!);
  const after = model.update().state.IPv4!;
  const full = worstPartWalk(planFamilyFull(after));
  assert.ok(full <= MAX_CHAINS, `full sync: ${full.toFixed(1)} steps per line`);
  const added = worstPartWalk(planFamilyIncremental(before, after)!);
  assert.ok(added <= MAX_CHAINS, `one service added: ${added.toFixed(1)} steps per line`);
});
