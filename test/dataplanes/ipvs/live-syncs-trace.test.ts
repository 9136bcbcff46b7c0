// The live IPVS dataplane against the fake kernel (virtual servers over the fake netlink client,
// bound addresses, and the companion table in the fake nft, which applies the very scripts it
// sends through the tracer's parser): after random sequences of syncs — incremental, full in
// place, a restart that adopts what the earlier run left, a cleanup and a cold start — every
// packet the tracer follows through the fake's state ends as it does through the full render of
// the last state, and intact() finds the kernel as it left it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { parseIpvsRuleset, traceIpvs } from '../../../dataplanes/ipvs/trace.ts';
import { prng } from '../../support/prng.ts';
import { nodeHost, servicePackets } from '../../trace/service-packets.ts';
import { randomState } from '../nftables/random-state.ts';
import { FakeKernel } from './fake-kernel.ts';

const SEQUENCES = 6;
const STEPS = 8;

type Step = 'incremental' | 'full' | 'restart' | 'cold-start';
const STEP_KINDS: readonly Step[] = [
  'incremental',
  'incremental',
  'incremental',
  'full',
  'restart',
  'cold-start',
];

test('after random live syncs of every kind, the fake IPVS kernel treats every packet as the full render of the last state does', async () => {
  const seed = Number(process.env.KPROXY_SEED ?? Date.now() % 100_000);
  console.log(`ipvs live syncs ≡ full render: seed ${seed} (KPROXY_SEED=${seed} to repeat)`);
  const random = prng(seed);
  const seen = new Map<Step, number>();
  let traced = 0;
  for (let sequence = 0; sequence < SEQUENCES; sequence++) {
    const kernel = new FakeKernel();
    const dataplane = () =>
      new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
    let live = dataplane();
    await live.start();
    let state = randomState(random);
    await live.sync(state, 'full');
    const states = [state];
    const steps: Step[] = ['cold-start'];
    for (let n = 0; n < STEPS; n++) {
      const step = STEP_KINDS[Math.floor(random() * STEP_KINDS.length)]!;
      state = randomState(random);
      if (step === 'restart') {
        live = dataplane();
        await live.start();
      }
      if (step === 'cold-start') {
        await live.cleanup();
        live = dataplane();
        await live.start();
      }
      await live.sync(state, step === 'incremental' ? 'incremental' : 'full');
      seen.set(step, (seen.get(step) ?? 0) + 1);
      states.push(state);
      steps.push(step);

      const what = `seed ${seed} sequence ${sequence} after ${steps.join(', ')}`;
      const rendered = parseIpvsRuleset(ipvsPlanner.render(ipvsPlanner.planFull(state)));
      const left = kernel.traceRuleset();
      const host = nodeHost(state);
      for (const packet of servicePackets(states.slice(-2))) {
        const expected = traceIpvs(rendered, packet, host);
        assert.deepEqual(traceIpvs(left, packet, host), expected, `${what}: ${JSON.stringify(packet)}`);
        traced++;
      }
      assert.equal(await live.intact(), true, `${what}: intact`);
    }
  }
  for (const kind of new Set(STEP_KINDS)) assert.ok((seen.get(kind) ?? 0) > 0, `no ${kind} step ran`);
  assert.ok(traced > 1000, `only ${traced} packets traced`);
});
