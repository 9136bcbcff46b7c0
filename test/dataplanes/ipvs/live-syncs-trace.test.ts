// The live IPVS dataplane against the fake kernel (virtual servers over the fake netlink client,
// bound addresses, and the companion table in the fake nft, which applies the very scripts it
// sends through the tracer's parser): after random sequences of syncs — incremental, full in
// place, a restart that adopts what the earlier run left, a cleanup and a cold start — every
// packet the tracer follows through the fake's state ends as it does through the full render of
// the last state, and intact() finds the kernel as it left it.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/live-syncs-trace.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { parseIpvsRuleset, traceIpvs } from '../../../dataplanes/ipvs/trace.ts';
import { nodeHost, servicePackets } from '../../trace/service-packets.ts';
import { runLiveSyncSequences } from '../live-sync-sequences.ts';
import { FakeKernel } from './fake-kernel.ts';

test('after random live syncs of every kind, the fake IPVS kernel treats every packet as the full render of the last state does', async () => {
  await runLiveSyncSequences({
    name: 'ipvs',
    sequences: 6,
    steps: 8,
    stepKinds: ['incremental', 'incremental', 'incremental', 'full', 'restart', 'cold-start'],
    coldStartRestarts: true,
    node() {
      const kernel = new FakeKernel();
      return {
        dataplane: () =>
          new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() }),
        async check(_live, states, what) {
          const state = states.at(-1)!;
          const rendered = parseIpvsRuleset(ipvsPlanner.render(ipvsPlanner.planFull(state)));
          const left = kernel.traceRuleset();
          const host = nodeHost(state);
          let traced = 0;
          for (const packet of servicePackets(states.slice(-2))) {
            const expected = traceIpvs(rendered, packet, host);
            assert.deepEqual(traceIpvs(left, packet, host), expected, `${what}: ${JSON.stringify(packet)}`);
            traced++;
          }
          return traced;
        },
      };
    },
  });
});
