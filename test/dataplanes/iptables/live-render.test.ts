// What `kproxy render --mode iptables` prints is what the live dataplane sends, byte for byte: a
// full sync on an empty node, incremental syncs (render --since), and a cold start in parts on
// iptables-nft (render --chunks). The live dataplane runs against a fake kernel that answers its
// reads (iptables -C/-S, iptables-save) from what its restores wrote.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { IptablesBackend } from '../../../dataplanes/iptables/backend.ts';
import { insertLine } from '../../../dataplanes/iptables/jump-rules.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import type { IptablesTable } from '../../../dataplanes/iptables/restore-plan.ts';
import { renderPlanInParts } from '../../../dataplanes/iptables/restore-plan.ts';
import type { DualStackState } from '../../../src/model/proxy-state.ts';
import { prng } from '../../support/prng.ts';
import { FakeTables } from './fake-tables.ts';
import { randomChange, randomState } from './random-states.ts';
import { type RecordedCall, RecordingRunner } from './recording-runner.ts';
import { renderedInputs, sentInputs } from './rendered-inputs.ts';
import { SCENARIOS } from './scenarios.ts';

/** A recording runner backed by one FakeTables per family. */
function fakeNode(): { runner: RecordingRunner; kernels: { IPv4: FakeTables; IPv6: FakeTables } } {
  const kernels = { IPv4: new FakeTables(), IPv6: new FakeTables() };
  const runner = new RecordingRunner((call: RecordedCall) => {
    if (call.command === 'conntrack') return undefined;
    const kernel = call.command.startsWith('ip6') ? kernels.IPv6 : kernels.IPv4;
    if (call.command.endsWith('-restore')) {
      kernel.restore(call.input);
      return undefined;
    }
    if (call.command.endsWith('-save')) return { stdout: '' };
    const args = call.args.filter((a) => a !== '-w');
    const table = args[args.indexOf('-t') + 1] as IptablesTable;
    if (args.includes('-C')) {
      const [from, ...spec] = args.slice(args.indexOf('-C') + 1);
      const rule = insertLine({ table, from: from!, spec }).replace(/^-I (\S+) 1 /, '-A $1 ');
      return { exitCode: kernel.rules(table, from!).includes(rule) ? 0 : 1 };
    }
    if (args.includes('-S')) {
      const chain = args[args.indexOf('-S') + 1]!;
      const rules = kernel.rules(table, chain);
      return rules.length > 0 ? { stdout: `-N ${chain}\n${rules.join('\n')}\n` } : { exitCode: 1 };
    }
    throw new Error(`fake node: unexpected ${call.command} ${call.args.join(' ')}`);
  });
  return { runner, kernels };
}

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

const seed = Number(process.env.KPROXY_SEED ?? Date.now() % 100000);
process.stdout.write(`# iptables render ≡ live: seed ${seed} (KPROXY_SEED=${seed} repeats it)\n`);

for (const backend of ['legacy', 'nft'] as const satisfies IptablesBackend[]) {
  test(`iptables-${backend}: render of a full sync is what a full sync on an empty node sends`, async () => {
    for (const [name, state] of Object.entries(SCENARIOS)) {
      const { runner } = fakeNode();
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
    const random = prng(seed);
    const { runner } = fakeNode();
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
  });
}

test('iptables-nft: render --chunks is what a cold start and incremental syncs in parts send', async () => {
  const random = prng(seed);
  const { runner } = fakeNode();
  const dataplane = new IptablesDataplane({ runner, backend: 'nft', nftChainsPerRestore: 3 });
  let state = { IPv4: randomState(random) };
  const coldStart = await syncAndRecord(dataplane, runner, state, 'full');
  assert.ok(coldStart.length > 1, `seed ${seed}: the cold start was not split`);
  assert.deepEqual(coldStart, renderedInputs(renderPlanInParts(iptablesPlanner.planFull(state), 3)));
  for (let step = 0; step < 10; step++) {
    const next = { IPv4: randomChange(random, state.IPv4) };
    assert.deepEqual(
      await syncAndRecord(dataplane, runner, next, 'incremental'),
      renderedInputs(renderPlanInParts(iptablesPlanner.planIncremental(state, next), 3)),
      `seed ${seed}, step ${step}`,
    );
    state = next;
  }
});

test('a later full sync inserts no jump that is already there, and leaves one of each', async () => {
  const { runner, kernels } = fakeNode();
  const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
  const state = SCENARIOS['dual-stack']!;
  await dataplane.sync(state, 'full');
  const again = await syncAndRecord(dataplane, runner, state, 'full');
  assert.deepEqual(
    again.filter(({ input }) => input.includes('\n-I ')),
    [],
  );
  for (const kernel of Object.values(kernels)) {
    assert.equal(kernel.rules('nat', 'PREROUTING').length, 1);
    assert.equal(kernel.rules('filter', 'FORWARD').length, 4);
  }
});

test('a full sync after someone removed one jump inserts just that one', async () => {
  const { runner, kernels } = fakeNode();
  const dataplane = new IptablesDataplane({ runner, backend: 'legacy' });
  const state = SCENARIOS['cluster-ip']!;
  await dataplane.sync(state, 'full');
  const [jump] = kernels.IPv4.rules('nat', 'POSTROUTING');
  kernels.IPv4.restore(`*nat\n-D${jump!.slice(2)}\nCOMMIT\n`);
  const [restore] = await syncAndRecord(dataplane, runner, state, 'full');
  assert.deepEqual(restore!.input.match(/^-I .*/gm), [
    '-I POSTROUTING 1 -m comment --comment "kproxy postrouting rules" -j KPROXY-POSTROUTING',
  ]);
});
