// What `kproxy render --mode iptables` prints is what the live dataplane sends, byte for byte: a
// full sync on an empty node, incremental syncs (render --since), and a cold start in parts on
// iptables-nft (render --chunks). The live dataplane runs against a fake kernel that answers its
// reads (iptables -C/-S, iptables-save) from what its restores wrote (fake-tables.ts).
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/live-render.test.ts --name 'render --since|render --chunks'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import type { IptablesBackend } from '../../../dataplanes/iptables/backend.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { renderPlanInParts } from '../../../dataplanes/iptables/restore-plan.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { fakeIptablesNode } from './fake-tables.ts';
import { randomChange, randomState } from './random-states.ts';
import type { RecordingRunner } from './recording-runner.ts';
import { renderedInputs, sentInputs } from './rendered-inputs.ts';
import { SCENARIOS } from './scenarios.ts';

async function syncAndRecord(
  dataplane: IptablesDataplane,
  runner: RecordingRunner,
  state: DualStackState,
  kind: 'full' | 'incremental',
) {
  runner.calls.length = 0;
  const outcome = await dataplane.sync(state, kind);
  assert.equal(outcome.kind, kind);
  // Every rule it changed went through a restore: no other iptables command writes.
  const writes = runner.calls.filter(
    (c) =>
      c.command.includes('tables') && ['-I', '-A', '-D', '-N', '-X', '-F'].some((v) => c.args.includes(v)),
  );
  assert.deepEqual(writes, []);
  return sentInputs(runner.calls);
}

const seeds = testSeeds();
process.stdout.write(seedsLine('iptables render ≡ live', seeds));

for (const backend of ['legacy', 'nft'] as const satisfies IptablesBackend[]) {
  test(`iptables-${backend}: render of a full sync is what a full sync on an empty node sends`, async () => {
    for (const [name, state] of Object.entries(SCENARIOS)) {
      const { runner } = fakeIptablesNode();
      const dataplane = new IptablesDataplane({ runner, backend });
      await dataplane.start();
      assert.deepEqual(
        await syncAndRecord(dataplane, runner, state, 'full'),
        renderedInputs(iptablesPlanner.render(iptablesPlanner.planFull(state))),
        name,
      );
    }
  });

  test(`iptables-${backend}: render --since is what each incremental sync sends`, async () => {
    for (const seed of seeds) {
      const random = prng(seed);
      const { runner } = fakeIptablesNode();
      const dataplane = new IptablesDataplane({ runner, backend });
      let state = { IPv4: randomState(random) };
      await dataplane.sync(state, 'full');
      for (let step = 0; step < 20; step++) {
        const next = { IPv4: randomChange(random, state.IPv4) };
        assert.deepEqual(
          await syncAndRecord(dataplane, runner, next, 'incremental'),
          renderedInputs(iptablesPlanner.render(iptablesPlanner.planIncremental(state, next))).filter(
            ({ input }) => input !== '',
          ),
          `seed ${seed}, step ${step}`,
        );
        state = next;
      }
    }
  });
}

test('iptables-nft: render --chunks is what a cold start and incremental syncs in parts send', async () => {
  for (const seed of seeds) {
    const random = prng(seed);
    const { runner } = fakeIptablesNode();
    const dataplane = new IptablesDataplane({ runner, backend: 'nft', nftChainsPerRestore: 3 });
    const coldStartInParts = (s: DualStackState) =>
      renderedInputs(renderPlanInParts(iptablesPlanner.planFull(s), 3));
    // A state of a few service ports fits one restore of 3 chains (~1.3% of draws): another is drawn
    // then, so that the cold start goes in parts; 8 draws leave ~1e-15.
    let state = { IPv4: randomState(random) };
    for (let draw = 1; draw < 8 && coldStartInParts(state).length <= 1; draw++)
      state = { IPv4: randomState(random) };
    const coldStart = await syncAndRecord(dataplane, runner, state, 'full');
    assert.ok(coldStart.length > 1, `seed ${seed}: the cold start was not split`);
    assert.deepEqual(coldStart, coldStartInParts(state));
    for (let step = 0; step < 10; step++) {
      const next = { IPv4: randomChange(random, state.IPv4) };
      assert.deepEqual(
        await syncAndRecord(dataplane, runner, next, 'incremental'),
        renderedInputs(renderPlanInParts(iptablesPlanner.planIncremental(state, next), 3)),
        `seed ${seed}, step ${step}`,
      );
      state = next;
    }
  }
});

test('a later full sync inserts no jump that is already there, and leaves one of each', async () => {
  const { runner, kernel } = fakeIptablesNode();
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  const state = SCENARIOS['dual-stack']!;
  await dataplane.sync(state, 'full');
  const again = await syncAndRecord(dataplane, runner, state, 'full');
  assert.deepEqual(
    again.filter(({ input }) => input.includes('\n-I ')),
    [],
  );
  for (const family of ['IPv4', 'IPv6'] as const) {
    assert.equal(kernel.rules('nat', 'PREROUTING', family).length, 1);
    assert.equal(kernel.rules('filter', 'FORWARD', family).length, 4);
  }
});

test('a full sync after someone removed one jump inserts just that one', async () => {
  const { runner, kernel } = fakeIptablesNode('legacy');
  const dataplane = new IptablesDataplane({ runner, backend: 'legacy' });
  const state = SCENARIOS['cluster-ip']!;
  await dataplane.sync(state, 'full');
  const [jump] = kernel.rules('nat', 'POSTROUTING');
  kernel.restore(`*nat\n-D${jump!.slice(2)}\nCOMMIT\n`);
  const [restore] = await syncAndRecord(dataplane, runner, state, 'full');
  assert.deepEqual(restore!.input.match(/^-I .*/gm), [
    '-I POSTROUTING 1 -m comment --comment "kproxy postrouting rules" -j KPROXY-POSTROUTING',
  ]);
});
