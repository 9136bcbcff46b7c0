// ipvs.scheduler in nftables mode (scheduler.ts): which schedulers have a counterpart, and that
// render and the live dataplane both get it from the same option.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { buildNftablesDataplane } from '../../../dataplanes/nftables/build.ts';
import { MAGLEV_SLOTS, maglevTable } from '../../../dataplanes/nftables/maglev.ts';
import { createNftablesPlanner, nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { endpointHashApplier, schedulerChoice } from '../../../dataplanes/nftables/scheduler.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { applyScript, dump, dumpUpToNumbering } from './fake-nft.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { goldenStates } from './golden-states.ts';
import { randomState } from './random-state.ts';

test('rr (the default) picks at random, sh and mh hash the client address, the rest warn and pick at random', () => {
  for (const scheduler of [undefined, '', 'rr'])
    assert.deepEqual(schedulerChoice(scheduler), { endpointHash: undefined });
  assert.deepEqual(schedulerChoice('sh'), { endpointHash: 'source' });
  assert.deepEqual(schedulerChoice('mh'), { endpointHash: 'consistent' });
  for (const scheduler of ['wrr', 'lc', 'wlc', 'dh', 'sed', 'nq']) {
    const choice = schedulerChoice(scheduler);
    assert.equal(choice.endpointHash, undefined, scheduler);
    assert.match(
      choice.warning ?? '',
      new RegExp(`^ipvs.scheduler ${scheduler} has no nftables counterpart`),
    );
  }
});

test('the sh planner renders jhash picks for every key; the default planner renders the same state unchanged', () => {
  const state = goldenStates['external-traffic']!;
  const sh = createNftablesPlanner({ scheduler: 'sh' });
  const script = sh.render(sh.planFull(state));
  // numgen stays only in the maps' typeof declarations.
  assert.doesNotMatch(script, /add rule .*numgen/);
  assert.match(script, /jhash ip saddr mod 3 seed 0x6b70726f map @backends-tcp/);
  assert.equal(
    script,
    nftablesPlanner.render(nftablesPlanner.planFull(endpointHashApplier('source')(state))),
  );
  assert.doesNotMatch(nftablesPlanner.render(nftablesPlanner.planFull(state)), /jhash/);
});

test('the applied state keeps one node settings object per input one (planner.ts compares them by identity first)', () => {
  const apply = endpointHashApplier('source');
  const state = goldenStates['affinity-dual-stack']!;
  const [a, b] = [apply(state), apply(state)];
  assert.equal(a.IPv4!.node, b.IPv4!.node);
  assert.equal(a.IPv6!.node, b.IPv6!.node);
  assert.equal(a.IPv4!.node.endpointHash, 'source');
  assert.equal(a.IPv4!.servicePorts, state.IPv4!.servicePorts);
});

function withoutAffinity(state: DualStackState): DualStackState {
  const family = (s: ProxyState | undefined): ProxyState | undefined =>
    s && {
      ...s,
      servicePorts: new Map(
        [...s.servicePorts].map(([key, sp]) => [key, { ...sp, sessionAffinity: undefined }]),
      ),
    };
  return { ...(state.IPv4 && { IPv4: family(state.IPv4) }), ...(state.IPv6 && { IPv6: family(state.IPv6) }) };
}

// Random pairs of states; sweep with KPROXY_SEED=1 KPROXY_SEEDS=2000 node --test test/dataplanes/nftables/scheduler.test.ts
test('sh and mh: incremental ≡ full on the fake nft, for random pairs of states (mh to the element)', () => {
  const seeds = testSeeds({ count: 20 });
  process.stdout.write(seedsLine('sh, mh: incremental ≡ full', seeds));
  for (const scheduler of ['sh', 'mh']) {
    const planner = createNftablesPlanner({ scheduler });
    for (const seed of seeds) {
      const random = prng(seed);
      // mh's slots do not depend on the endpoints' order, so its maps are compared to the element,
      // without ClientIP affinity (whose maps are numbered by endpoint slot).
      const state = () => (scheduler === 'mh' ? withoutAffinity(randomState(random)) : randomState(random));
      const [a, b] = [state(), state()];
      const kernelA = applyScript(emptyNftRuleset(), planner.render(planner.planFull(a)));
      const viaIncremental = applyScript(kernelA, planner.render(planner.planIncremental(a, b)));
      const viaFull = applyScript(kernelA, planner.render(planner.planFull(b)));
      const same = scheduler === 'mh' ? dump : dumpUpToNumbering;
      assert.deepEqual(same(viaIncremental), same(viaFull), `${scheduler}: seed ${seed}`);
    }
  }
});

test('mh: an endpoint leaving rewrites only the slots whose owner changed', () => {
  const web = (n: number) =>
    servicePort('web', {
      clusterIP: '10.96.0.10',
      clusterEndpoints: Array.from({ length: n }, (_, i) => endpoint(`10.244.1.${10 + i}`)),
    });
  const planner = createNftablesPlanner({ scheduler: 'mh' });
  const names = (n: number) => Array.from({ length: n }, (_, i) => `10.244.1.${10 + i}:8080`);
  const [before, after] = [maglevTable(names(10)), maglevTable(names(9))];
  const changed = before.filter((owner, slot) => owner !== after[slot]).length;
  const script = planner.render(planner.planIncremental(ipv4([web(10)]), ipv4([web(9)])));
  const written = new Set([...script.matchAll(/10\.96\.0\.10 \. 80 \. (\d+)\b/g)].map((m) => Number(m[1])));
  const expected = before.flatMap((owner, slot) => (owner === after[slot] ? [] : [slot]));
  assert.deepEqual(
    [...written].sort((x, y) => x - y),
    expected,
    `the ${changed} slots whose owner changed, of ${MAGLEV_SLOTS}`,
  );
  assert.ok(changed < MAGLEV_SLOTS / 4, `${changed} slots`);
});

test('the dataplane kproxy run builds warns once of a scheduler without a counterpart, and only then', () => {
  for (const [scheduler, warnings] of [
    ['wrr', 1],
    ['lc', 1],
    ['sh', 0],
    ['mh', 0],
    ['rr', 0],
    [undefined, 0],
  ] as const) {
    const warned: string[] = [];
    // A runner given: nothing opens a socket or runs a tool while building.
    buildNftablesDataplane({ runner: execaRunner(), log: () => {}, scheduler, warn: (m) => warned.push(m) });
    assert.equal(warned.length, warnings, `${scheduler}: ${warned.join()}`);
    if (warnings) assert.match(warned[0]!, /no nftables counterpart.*picked at random/);
  }
});
