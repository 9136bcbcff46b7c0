// ipvs.scheduler in nftables mode (scheduler.ts): which schedulers have a counterpart, and that
// render and the live dataplane both get it from the same option.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createNftablesPlanner, nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { endpointHashApplier, schedulerChoice } from '../../../dataplanes/nftables/scheduler.ts';
import { goldenStates } from './golden-states.ts';

test('rr (the default) picks at random, sh hashes the client address, the rest warn and pick at random', () => {
  for (const scheduler of [undefined, '', 'rr'])
    assert.deepEqual(schedulerChoice(scheduler), { endpointHash: undefined });
  assert.deepEqual(schedulerChoice('sh'), { endpointHash: 'source' });
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
