// One valid Service with 300 ports × 50 endpoints (slices at the API's limit of 100 ports):
// planning it, in either mode, must give the event loop its turns (health probes, other services'
// updates) and plan exactly what the straight-through planner does. No timing is asserted: only that a 1 ms timer gets to run while
// planning that takes far longer than a slice (~10 ms) goes on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runInSlices } from '../../../contract/base/work-slices.ts';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { fullPlanSteps, iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { desiredRuleset, desiredRulesetSteps } from '../../../dataplanes/nftables/desired-ruleset.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { fullTransaction } from '../../../dataplanes/shared/nft/full-transaction.ts';
import { build, endpoint, service, slice } from '../../model/fixtures.ts';
import { RecordingCommandRunner, RecordingNftRunner } from '../nftables/recording-nft-runner.ts';

const PORTS = 300;
const ENDPOINTS = 50;

/** The Service and its slices, at the API's limit of 100 ports per slice. */
function largeServiceState(): DualStackState {
  const ports = Array.from({ length: PORTS }, (_, p) => ({ name: `p${p}`, port: 1000 + p, protocol: 'TCP' }));
  const endpoints = Array.from({ length: ENDPOINTS }, (_, e) => endpoint(`10.244.${e >> 8}.${e & 255}`));
  const slices = Array.from({ length: PORTS / 100 }, (_, s) =>
    slice('big', endpoints, {
      name: `big-${s}`,
      ports: ports.slice(s * 100, s * 100 + 100).map((p) => ({ ...p, port: 20000 + p.port })),
    }),
  );
  const output = build([service('big', { ports }), ...slices]);
  assert.equal(output.state.IPv4?.servicePorts.size, PORTS);
  return output.state;
}

/** Runs `work` and counts how often a 1 ms interval timer fired meanwhile. */
async function timerTicksDuring<T>(work: () => Promise<T>): Promise<{ result: T; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  try {
    return { result: await work(), ticks };
  } finally {
    clearInterval(timer);
  }
}

describe('a Service with 300 ports × 50 endpoints', () => {
  const state = largeServiceState();

  it('iptables: the full plan is made in slices, and is the plan made at once', async () => {
    const { result, ticks } = await timerTicksDuring(() => runInSlices(fullPlanSteps(state)));
    assert.ok(ticks > 0, 'no timer ran while the plan was made');
    assert.equal(iptablesPlanner.render(result), iptablesPlanner.render(iptablesPlanner.planFull(state)));
  });

  it('nftables: the desired ruleset is built in slices, and is the one built at once', async () => {
    const { result, ticks } = await timerTicksDuring(() => runInSlices(desiredRulesetSteps(state)));
    assert.ok(ticks > 0, 'no timer ran while the ruleset was built');
    assert.equal(fullTransaction(result).toString(), fullTransaction(desiredRuleset(state)).toString());
  });

  it('nftables: a cold start writes it in pieces, with timers running in between', async () => {
    const nft = new RecordingNftRunner();
    const dp = new NftablesDataplane({ nft, commands: new RecordingCommandRunner(), coldStartChunk: 5_000 });
    await dp.start();
    const { result, ticks } = await timerTicksDuring(() => dp.sync(state, 'full'));
    assert.equal(result.kind, 'full');
    assert.ok(nft.scripts.length > 2, 'not written in pieces');
    assert.ok(ticks > 0, 'no timer ran during the cold start');
    await dp.settled();
  });
});
