// The live dataplane against the fake iptables (which applies the very restores it sends, through
// the tracer's parser): after random sequences of syncs of every kind, on both backends —
// incremental, full in place, a restart that finds the chains, a cleanup and a cold start (in
// parts on iptables-nft) — every packet the tracer follows through the fake's tables ends as it
// does through the full render of the last state, the tables are the same, and intact() finds
// them so, reading them back through the fake's iptables-save.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/live-syncs-trace.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { traceIptables } from '../../../dataplanes/iptables/trace.ts';
import { parseIptablesRuleset } from '../../../dataplanes/iptables/trace-ruleset.ts';
import { nodeHost, servicePackets } from '../../trace/service-packets.ts';
import { runLiveSyncSequences } from '../live-sync-sequences.ts';
import { FakeTables, fakeIptablesNode } from './fake-tables.ts';
import { renderedInputs } from './rendered-inputs.ts';

/** Small enough that an iptables-nft cold start of a random state goes in several restores. */
const NFT_CHAINS_PER_RESTORE = 4;

test('after random live syncs of every kind, the fake iptables treats every packet as the full render of the last state does', async () => {
  await runLiveSyncSequences({
    name: 'iptables',
    sequences: 6,
    steps: 8,
    stepKinds: ['incremental', 'incremental', 'incremental', 'full', 'restart', 'cold-start'],
    node(sequence) {
      const backend = sequence % 2 === 0 ? 'nft' : 'legacy';
      const { runner, kernel } = fakeIptablesNode(backend);
      return {
        label: backend,
        dataplane: () =>
          new IptablesDataplane({
            runner,
            backend,
            nftChainsPerRestore: NFT_CHAINS_PER_RESTORE,
            dumpShare: 1,
          }),
        async check(live, states, what) {
          const state = states.at(-1)!;
          const text = iptablesPlanner.render(iptablesPlanner.planFull(state));
          const rendered = new FakeTables();
          for (const { tool, input } of renderedInputs(text))
            rendered.restore(input, tool.startsWith('ip6') ? 'IPv6' : 'IPv4');
          for (const family of ['IPv4', 'IPv6'] as const)
            assert.equal(kernel.dump(family), rendered.dump(family), `${what}: the same ${family} tables`);
          // The tracer's own reading of render's text, as `kproxy trace --input` reads it.
          const renderedRules = parseIptablesRuleset(text);
          const host = nodeHost(state);
          let traced = 0;
          for (const packet of servicePackets(states.slice(-2))) {
            const expected = traceIptables(renderedRules, packet, host);
            assert.deepEqual(
              traceIptables(kernel.ruleset, packet, host),
              expected,
              `${what}: ${JSON.stringify(packet)}`,
            );
            traced++;
          }
          // intact() starts a read of the tables; the driver's next intact() reports what it found.
          assert.equal(await live.intact(), true, `${what}: intact`);
          await live.settled?.();
          return traced;
        },
      };
    },
  });
});
