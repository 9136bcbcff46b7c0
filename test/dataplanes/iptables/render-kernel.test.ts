// Kernel test: `kproxy render --mode iptables` output, loaded with the plain restore tool into an
// empty namespace, gives what a live full sync leaves (normalised iptables-save, both families,
// jumps from the built-in chains included); so does `render --chunks` loaded part by part. Beside
// another program's rules in the built-in chains, repeated full syncs insert no jump twice and
// keep those rules. Runs once per iptables backend.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/render-kernel.test.ts --name 'equal a live full sync'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { renderPlanInParts } from '../../../dataplanes/iptables/restore-plan.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { randomState } from './random-states.ts';
import { renderedInputs } from './rendered-inputs.ts';
import { normalisedSave } from './saved-tables.ts';
import { SCENARIOS } from './scenarios.ts';

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}: rendered inputs loaded with iptables-restore equal a live full sync`, async (t) => {
    if (!requireRoot(t, 'network namespaces and iptables')) return;
    const seeds = testSeeds();
    process.stdout.write(seedsLine(`iptables-${backend} render ≡ live on the kernel`, seeds));
    for (const seed of seeds) {
      // A lab per seed: a sweep's namespaces go as it goes.
      const lab = new Lab(`ipt-render-${backend}-${seed}`);
      try {
        // The fixed scenarios once, the random state of every seed.
        const states: Record<string, DualStackState> = {
          ...(seed === seeds[0] && {
            'dual-stack': SCENARIOS['dual-stack']!,
            'load-balancer': SCENARIOS['load-balancer']!,
          }),
          random: { IPv4: randomState(prng(seed)) },
        };
        for (const [name, state] of Object.entries(states)) {
          const liveNs = await lab.addNetns(`live-${name}`);
          const renderedNs = await lab.addNetns(`rendered-${name}`);
          const chunkedNs = await lab.addNetns(`chunked-${name}`);
          const live = new IptablesDataplane({
            runner: lab.runner(liveNs),
            backend,
          });
          await live.start();
          await live.sync(state, 'full');
          const plan = iptablesPlanner.planFull(state);
          // The whole input with the plain tool (no --noflush: the namespace is empty anyway)...
          for (const { tool, input } of renderedInputs(iptablesPlanner.render(plan))) {
            await lab.exec(renderedNs, tool.replace('-restore', `-${backend}-restore`), [], { input });
          }
          // ...and in parts of 3 service chains, each with --noflush as its header says.
          for (const { tool, input } of renderedInputs(renderPlanInParts(plan, 3))) {
            await lab.exec(chunkedNs, tool.replace('-restore', `-${backend}-restore`), ['--noflush'], {
              input,
            });
          }
          for (const family of ['IPv4', 'IPv6'] as const) {
            const expected = await normalisedSave(lab, liveNs, backend, family);
            if (state[family] !== undefined) assert.match(expected, /^-A PREROUTING .* -j KPROXY-SERVICES$/m);
            const where = `seed ${seed}, ${name}, ${family}`;
            assert.equal(await normalisedSave(lab, renderedNs, backend, family), expected, where);
            assert.equal(await normalisedSave(lab, chunkedNs, backend, family), expected, where);
          }
        }
      } finally {
        await lab.destroy();
      }
    }
  });
}

/** Rules another program keeps in the built-in chains kproxy jumps from. */
const FOREIGN: readonly (readonly string[])[] = [
  ['-t', 'filter', '-A', 'INPUT', '-s', '192.0.2.1', '-j', 'ACCEPT'],
  ['-t', 'filter', '-A', 'FORWARD', '-s', '192.0.2.1', '-j', 'ACCEPT'],
  ['-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.1', '-j', 'RETURN'],
  ['-t', 'nat', '-A', 'POSTROUTING', '-s', '192.0.2.1', '-j', 'RETURN'],
];

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}: beside other software's rules, full syncs never repeat a jump, and render with --noflush agrees`, async (t) => {
    if (!requireRoot(t, 'network namespaces and iptables')) return;
    const lab = new Lab(`ipt-render-foreign-${backend}`);
    t.after(() => lab.destroy());
    const state = { IPv4: SCENARIOS['cluster-ip']!.IPv4! };
    const liveNs = await lab.addNetns('live');
    const renderedNs = await lab.addNetns('rendered');
    for (const ns of [liveNs, renderedNs]) {
      for (const rule of FOREIGN) await lab.exec(ns, `iptables-${backend}`, ['-w', ...rule]);
    }
    const live = new IptablesDataplane({ runner: lab.runner(liveNs), backend });
    await live.start();
    await live.sync(state, 'full');
    // A second full sync (as after a restart or a canary failure) finds every jump in its chain's listing.
    await new IptablesDataplane({ runner: lab.runner(liveNs), backend }).sync(state, 'full');
    for (const { tool, input } of renderedInputs(iptablesPlanner.render(iptablesPlanner.planFull(state)))) {
      await lab.exec(renderedNs, tool.replace('-restore', `-${backend}-restore`), ['--noflush'], { input });
    }
    const saved = await normalisedSave(lab, liveNs, backend);
    assert.equal(saved.match(/^-A PREROUTING .*KPROXY-SERVICES$/gm)?.length, 1, saved);
    // Ours first, theirs kept after.
    assert.match(
      saved,
      /^:PREROUTING\n-A PREROUTING .*-j KPROXY-SERVICES\n-A PREROUTING -s 192\.0\.2\.1\/32 -j RETURN$/m,
    );
    assert.equal(await normalisedSave(lab, renderedNs, backend), saved);
  });
}
