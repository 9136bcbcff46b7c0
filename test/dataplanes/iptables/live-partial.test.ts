// Kernel test: for random change sequences (seeded; the seed is printed), a full sync followed by
// incremental syncs leaves exactly the kernel state of a full sync of the last state, compared as
// normalised iptables-save output. Runs once per iptables backend. The full sync's state is its
// render restored into a namespace of its own (render-kernel.test.ts proves the two equal): one
// restore a step instead of a live cleanup and full sync (~13 tool runs), half of a seed's cost.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/live-partial.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import type { IptablesPlan } from '../../../dataplanes/iptables/plan-types.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { RuleCounts } from '../../../dataplanes/iptables/restore-plan.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { randomChange, randomState } from './random-states.ts';
import { renderedInputs } from './rendered-inputs.ts';
import { normalisedSave } from './saved-tables.ts';

/** The rules a full sync of `plan` leaves in kproxy's chains, as the live dataplane counts them. */
function ruleCount(plan: IptablesPlan): number {
  const counts = new RuleCounts();
  if (plan.IPv4) counts.apply(plan.IPv4);
  return (['filter', 'nat', 'mangle'] as const).reduce((sum, table) => sum + counts.total(table), 0);
}

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}: incremental syncs end where a full sync of the last state does`, async (t) => {
    if (!requireRoot(t, 'network namespaces and iptables')) return;
    const seeds = testSeeds();
    process.stdout.write(seedsLine(`iptables-${backend} partial ≡ full on the kernel`, seeds));
    for (const seed of seeds) {
      const random = prng(seed);
      // A lab per seed: a sweep's namespaces go as it goes.
      const lab = new Lab(`ipt-partial-${backend}-${seed}`);
      try {
        const incNs = await lab.addNetns('inc');
        const fullNs = await lab.addNetns('full');
        // Restores in parts of a few chains, so that splitting (restore-chunks.ts) meets the kernel too.
        const incremental = new IptablesDataplane({
          runner: lab.runner(incNs),
          backend,
          nftChainsPerRestore: 4,
        });
        await incremental.start();

        let state = { IPv4: randomState(random) };
        await incremental.sync(state, 'full');
        for (let step = 0; step < 12; step++) {
          state = { IPv4: randomChange(random, state.IPv4) };
          const outcome = await incremental.sync(state, 'incremental');
          assert.equal(outcome.kind, 'incremental', `seed ${seed}, step ${step}: no fallback expected`);
          const plan = iptablesPlanner.planFull(state);
          assert.equal(outcome.objectCount, ruleCount(plan), `seed ${seed}, step ${step}: rule count`);
          // Without --noflush: a full plan names every table kproxy writes, so the restore empties
          // each, the last step's rules included, before it fills it.
          for (const { tool, input } of renderedInputs(iptablesPlanner.render(plan))) {
            await lab.exec(fullNs, tool.replace('-restore', `-${backend}-restore`), [], { input });
          }
          assert.equal(
            await normalisedSave(lab, incNs, backend),
            await normalisedSave(lab, fullNs, backend),
            `seed ${seed}, step ${step}`,
          );
        }
        // Cleanup goes in parts too (cleanup-plan.ts): nothing of ours may survive it.
        await incremental.cleanup();
        assert.doesNotMatch(await normalisedSave(lab, incNs, backend), /KPROXY/, `seed ${seed}`);
      } finally {
        await lab.destroy();
      }
    }
  });
}
