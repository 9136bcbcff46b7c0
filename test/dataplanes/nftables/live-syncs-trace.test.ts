// The live dataplane against the fake nft (which applies the very scripts it sends): after random
// sequences of syncs of every kind — a cold start in pieces, fragments, whole-ruleset diffs, full
// syncs in place, a restart that adopts the tables — every packet the tracer follows through the
// fake's ruleset ends as it does through the fresh full render of the last state, and the two
// rulesets are the same (but for the canary's nonce).
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/live-syncs-trace.test.ts --name 'after random live syncs'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { CANARY_SET } from '../../../dataplanes/shared/nft/ruleset.ts';
import { traceNftables } from '../../../dataplanes/shared/trace/nft.ts';
import { emptyNftRuleset, type NftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import type { TraceReport } from '../../../dataplanes/shared/trace/outcome.ts';
import { prng } from '../../support/prng.ts';
import { nodeHost, servicePackets } from '../../trace/service-packets.ts';
import { runLiveSyncSequences } from '../live-sync-sequences.ts';
import { applyScript, dumpUpToNumbering, FakeNft } from './fake-nft.ts';
import { randomState } from './random-state.ts';
import { RecordingCommandRunner } from './recording-nft-runner.ts';

/** Small enough that a cold start of a random state goes in several pieces. */
const COLD_START_CHUNK = 6;

/** `drawn` with `prev`'s node settings per family, so fragments apply. */
function sameNode(prev: DualStackState, drawn: DualStackState): DualStackState {
  const keep = (next: ProxyState | undefined, before: ProxyState | undefined) =>
    next && before ? { ...next, node: before.node } : next;
  return {
    ...(drawn.IPv4 && { IPv4: keep(drawn.IPv4, prev.IPv4) }),
    ...(drawn.IPv6 && { IPv6: keep(drawn.IPv6, prev.IPv6) }),
  };
}

/**
 * The state without the canary's nonce (each full sync writes its own), and without the endpoint
 * indexes: incremental syncs keep an endpoint's slot, a full sync numbers in address order.
 */
function withoutNonce(ruleset: NftRuleset): unknown {
  const copy = structuredClone(ruleset);
  for (const table of copy.tables.values()) table.sets.get(CANARY_SET)?.elements.splice(0);
  return dumpUpToNumbering(copy);
}

/**
 * A trace with its random picks in no order and the index of each endpoint map element it read
 * (and of each pick) left out: the endpoints' indexes may differ from the full render's
 * (endpoint-slots.ts).
 */
function traceUpToNumbering(report: TraceReport): unknown {
  const branches = report.branches.map((branch) => ({
    ...branch,
    steps: rememberedInNoOrder(
      branch.steps.map((step) => ({
        ...step,
        text: step.text
          .replace(/^(@\S*backends\S* .*) \. \d+ : /, '$1 . * : ')
          .replace(/^anonymous map \d+ : \d+$/, 'anonymous map * : *'),
      })),
    ),
  }));
  return { ...report, branches: branches.map((b) => JSON.stringify(b)).sort() };
}

/**
 * The endpoints a ClientIP port's remembered chain looks up, in no order: it checks them in slot
 * order, which is the full render's address order only until an incremental sync keeps a slot.
 */
function rememberedInNoOrder<T extends { chain: string; kind: string; text: string }>(steps: T[]): T[] {
  const out = [...steps];
  for (let start = 0; start < out.length; ) {
    const chain = out[start]!.chain;
    let end = start;
    while (end < out.length && out[end]!.chain === chain) end++;
    if (chain.includes('-remembered-')) {
      const at = out.flatMap((step, i) => (i >= start && i < end && step.kind === 'element' ? [i] : []));
      const sorted = at.map((i) => out[i]!).sort((x, y) => x.text.localeCompare(y.text));
      at.forEach((i, k) => {
        out[i] = sorted[k]!;
      });
    }
    start = end;
  }
  return out;
}

test('after random live syncs of every kind, the fake kernel treats every packet as the full render of the last state does', async () => {
  await runLiveSyncSequences({
    name: 'nftables',
    sequences: 10,
    steps: 8,
    // fragments: an incremental sync with the node's settings kept; diff: one with them changed.
    stepKinds: ['fragments', 'fragments', 'fragments', 'diff', 'full', 'restart', 'cold-start'],
    kindKept: true,
    nextState: (step, previous, drawn) => (step === 'fragments' ? sameNode(previous, drawn) : drawn),
    node() {
      const nft = new FakeNft();
      return {
        dataplane: () =>
          new NftablesDataplane({
            nft,
            commands: new RecordingCommandRunner(),
            coldStartChunk: COLD_START_CHUNK,
          }),
        async check(_live, states, what) {
          const state = states.at(-1)!;
          const rendered = applyScript(
            emptyNftRuleset(),
            nftablesPlanner.render(nftablesPlanner.planFull(state)),
          );
          assert.deepEqual(withoutNonce(nft.ruleset), withoutNonce(rendered), `${what}: the same ruleset`);
          const host = nodeHost(state);
          let traced = 0;
          for (const packet of servicePackets(states.slice(-2))) {
            const expected = traceNftables(rendered, packet, { host });
            assert.deepEqual(
              traceUpToNumbering(nft.trace(packet, host)),
              traceUpToNumbering(expected),
              `${what}: ${JSON.stringify(packet)}`,
            );
            traced++;
          }
          return traced;
        },
      };
    },
  });
});

test('intact() asks the fake as it asks nft -c: a chain flushed by someone else is seen', async () => {
  const nft = new FakeNft();
  const live = new NftablesDataplane({ nft, commands: new RecordingCommandRunner() });
  await live.start();
  await live.sync(randomState(prng(5)), 'full');
  assert.equal(await live.intact(), true);
  const [family, table] = [...nft.ruleset.tables.values()].map((t) => [t.family, t] as const)[0]!;
  const chain = [...table.chains.values()].find((c) => c.rules.length > 0)!;
  await nft.run(`flush chain ${family} ${table.name} ${chain.name}\n`);
  assert.equal(await live.intact(), false, `${chain.name} flushed`);
  await live.sync(randomState(prng(5)), 'full');
  assert.equal(await live.intact(), true, 'repaired by a full sync');
});
