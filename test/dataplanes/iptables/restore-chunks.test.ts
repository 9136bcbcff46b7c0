// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/restore-chunks.test.ts --name 'small parts'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FamilyPlan } from '../../../dataplanes/iptables/plan-types.ts';
import { planFamilyFull, planFamilyIncremental } from '../../../dataplanes/iptables/planner.ts';
import { restoreParts } from '../../../dataplanes/iptables/restore-chunks.ts';
import { restoreInput } from '../../../dataplanes/iptables/restore-plan.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { FakeTables } from './fake-tables.ts';
import { randomChange, randomState } from './random-states.ts';

/** Applies the plan in parts (each must commit on its own) and returns the resulting tables. */
function applyInParts(kernel: FakeTables, plan: FamilyPlan, maxChains: number): number {
  const parts = restoreParts(plan, maxChains);
  for (const part of parts) kernel.restore(restoreInput(part));
  return parts.length;
}

test('a plan applied in small parts ends as the plan applied at once, every part valid', () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('restore parts', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    let splitRuns = 0;
    for (let run = 0; run < 20; run++) {
      let state = randomState(random);
      const parted = new FakeTables();
      const whole = new FakeTables();
      splitRuns += applyInParts(parted, planFamilyFull(state), 3) > 1 ? 1 : 0;
      whole.restore(restoreInput(planFamilyFull(state)));
      for (let step = 0; step < 5; step++) {
        const next = randomChange(random, state);
        const plan = planFamilyIncremental(state, next)!;
        applyInParts(parted, plan, 2);
        whole.restore(restoreInput(plan));
        assert.equal(parted.dump(), whole.dump(), `seed ${seed}, run ${run}, step ${step}`);
        state = next;
      }
    }
    assert.ok(splitRuns > 10, `only ${splitRuns} of 20 full plans were split: the test lost its point`);
  }
});

test('a plan within the limit stays one restore', () => {
  const state = randomState(prng(1));
  const plan = planFamilyFull(state);
  assert.deepEqual(restoreParts(plan, 10_000), [plan]);
});
