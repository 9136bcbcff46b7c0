// The host half of trace-prediction.vmtest.ts, which the VM runs for one seed of the clock: for
// every seed, the cluster and flows it draws meet, by the tracer's prediction of the rendered
// rules, every outcome that test requires of each origin (DNAT and REJECT from outside, a pod and
// the node). Whether packets then meet the predictions only the VM can say.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/vm/random-flows.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ipvsPlanner } from '../../../../dataplanes/ipvs/planner.ts';
import { traceRuleText } from '../../../../src/cli/trace.ts';
import { prng } from '../../../support/prng.ts';
import { seedsLine, testSeeds } from '../../../support/seeds.ts';
import { FLOWS, NODE_HOST, randomFlows, randomState, unmetOutcomes } from './random-flows.ts';

test(`the VM trace test's random flows meet every outcome it requires of each origin`, () => {
  const seeds = testSeeds({ count: 20 });
  process.stdout.write(seedsLine('ipvs trace-prediction flows', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    const state = randomState(random);
    const rendered = ipvsPlanner.render(ipvsPlanner.planFull(state));
    const met = new Map<string, number>();
    for (const { packet } of randomFlows(random, state, FLOWS)) {
      const kind = traceRuleText('ipvs', rendered, packet, NODE_HOST).branches[0]?.outcome.kind ?? 'none';
      met.set(`${packet.via} ${kind}`, (met.get(`${packet.via} ${kind}`) ?? 0) + 1);
    }
    assert.deepEqual(unmetOutcomes(met), [], `seed ${seed}: ${JSON.stringify([...met])}`);
  }
});
