// What `kproxy render --since` prints for a change over the round budget (src/cli/render-rounds.ts)
// is what the daemon's sync step sends for it, round by round, byte for byte: the step drives the
// live dataplane against a fake kernel (fake-tables.ts), as live-render.test.ts does for one plan.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/live-render-rounds.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changedServicePorts } from '../../../contract/changed-service-ports.ts';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import type { IptablesBackend } from '../../../dataplanes/iptables/backend.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import type { IptablesPlan } from '../../../dataplanes/iptables/plan-types.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { renderPlanInParts } from '../../../dataplanes/iptables/restore-plan.ts';
import { ROUND_HEADER, renderSince } from '../../../src/cli/render-rounds.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { quietSyncStep, scriptedModel } from '../../sync/step-fixtures.ts';
import { fakeIptablesNode } from './fake-tables.ts';
import { randomChange, randomState } from './random-states.ts';
import { renderedInputs, sentInputs } from './rendered-inputs.ts';

const seeds = testSeeds();
process.stdout.write(seedsLine('iptables render rounds ≡ sync step', seeds));

/** Random changes are a few ports of up to 7 endpoints each: a budget of 4 splits most of them. */
const BUDGET = 4;

for (const backend of ['legacy', 'nft'] as const satisfies IptablesBackend[]) {
  test(`iptables-${backend}: render --since in rounds is what the sync step sends, round by round`, async () => {
    for (const seed of seeds) {
      const random = prng(seed);
      const { runner } = fakeIptablesNode();
      const dataplane = new IptablesDataplane({ runner, backend, nftChainsPerRestore: 3 });
      let state: DualStackState = { IPv4: randomState(random) };
      const model = scriptedModel(state);
      const step = quietSyncStep(model, dataplane, BUDGET);
      await step.sync('full');
      const print = (plan: IptablesPlan) =>
        backend === 'nft' ? renderPlanInParts(plan, 3) : iptablesPlanner.render(plan);
      // 15 changes, more while fewer than 3 went in rounds: 15 alone missed 3 for ~5e-4 of seeds;
      // over 20,000 seeds 3 took at most 22, the tail halving per change, so 48 leaves ~1e-11.
      let split = 0;
      let i = 0;
      for (; i < 15 || (split < 3 && i < 48); i++) {
        const next = { IPv4: randomChange(random, state.IPv4!) };
        model.next(next, changedServicePorts(state.IPv4, next.IPv4));
        runner.calls.length = 0;
        assert.equal((await step.sync('incremental')).kind, 'incremental');
        const rendered = renderSince(iptablesPlanner, state, next, print, BUDGET);
        if (rendered.includes(ROUND_HEADER)) split++;
        assert.deepEqual(
          sentInputs(runner.calls),
          renderedInputs(rendered).filter(({ input }) => input !== ''),
          `seed ${seed}, step ${i}`,
        );
        state = next;
      }
      assert.ok(split >= 3, `seed ${seed}: ${split} of ${i} changes went in rounds`);
    }
  });
}
