// The live dataplane against the fake iptables (which applies the very restores it sends, through
// the tracer's parser): after random sequences of syncs of every kind, on both backends —
// incremental, full in place, a restart that finds the chains, a cleanup and a cold start (in
// parts on iptables-nft) — every packet the tracer follows through the fake's tables ends as it
// does through the full render of the last state, the tables are the same, and intact() finds
// them so, reading them back through the fake's iptables-save.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { traceIptables } from '../../../dataplanes/iptables/trace.ts';
import { parseIptablesRuleset } from '../../../dataplanes/iptables/trace-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { nodeHost, servicePackets } from '../../trace/service-packets.ts';
import { randomState } from '../nftables/random-state.ts';
import { FakeTables, fakeIptablesNode } from './fake-tables.ts';
import { renderedInputs } from './rendered-inputs.ts';

const SEQUENCES = 6;
const STEPS = 8;
/** Small enough that an iptables-nft cold start of a random state goes in several restores. */
const NFT_CHAINS_PER_RESTORE = 4;

type Step = 'incremental' | 'full' | 'restart' | 'cold-start';
const STEP_KINDS: readonly Step[] = [
  'incremental',
  'incremental',
  'incremental',
  'full',
  'restart',
  'cold-start',
];

test('after random live syncs of every kind, the fake iptables treats every packet as the full render of the last state does', async () => {
  const seed = Number(process.env.KPROXY_SEED ?? Date.now() % 100_000);
  console.log(`iptables live syncs ≡ full render: seed ${seed} (KPROXY_SEED=${seed} to repeat)`);
  const random = prng(seed);
  const seen = new Map<Step, number>();
  let traced = 0;
  for (let sequence = 0; sequence < SEQUENCES; sequence++) {
    const backend = sequence % 2 === 0 ? 'nft' : 'legacy';
    const { runner, kernel } = fakeIptablesNode();
    const dataplane = () =>
      new IptablesDataplane({ runner, backend, nftChainsPerRestore: NFT_CHAINS_PER_RESTORE, dumpShare: 1 });
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
      if (step === 'cold-start') await live.cleanup();
      await live.sync(state, step === 'incremental' ? 'incremental' : 'full');
      seen.set(step, (seen.get(step) ?? 0) + 1);
      states.push(state);
      steps.push(step);

      const what = `seed ${seed} sequence ${sequence} (${backend}) after ${steps.join(', ')}`;
      const text = iptablesPlanner.render(iptablesPlanner.planFull(state));
      const rendered = new FakeTables();
      for (const { tool, input } of renderedInputs(text))
        rendered.restore(input, tool.startsWith('ip6') ? 'IPv6' : 'IPv4');
      for (const family of ['IPv4', 'IPv6'] as const)
        assert.equal(kernel.dump(family), rendered.dump(family), `${what}: the same ${family} tables`);
      // The tracer's own reading of render's text, as `kproxy trace --input` reads it.
      const renderedRules = parseIptablesRuleset(text);
      const host = nodeHost(state);
      for (const packet of servicePackets(states.slice(-2))) {
        const expected = traceIptables(renderedRules, packet, host);
        assert.deepEqual(
          traceIptables(kernel.ruleset, packet, host),
          expected,
          `${what}: ${JSON.stringify(packet)}`,
        );
        traced++;
      }
      assert.equal(await live.intact(), true, `${what}: intact`);
      await live.settled();
      assert.equal(await live.intact(), true, `${what}: intact after reading the tables back`);
    }
  }
  for (const kind of new Set(STEP_KINDS)) assert.ok((seen.get(kind) ?? 0) > 0, `no ${kind} step ran`);
  assert.ok(traced > 1000, `only ${traced} packets traced`);
});
