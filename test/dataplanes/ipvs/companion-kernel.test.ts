// Kernel test (host, in a throwaway namespace): the companion nft table as `render --mode ipvs`
// prints it loads with plain `nft -f`, and a full render followed by `render --since` renders
// leaves what a full render of the last state does (`nft -j list ruleset`, canonical). The live
// dataplane sends exactly these scripts (live-render.test.ts); the IPVS and dummy-link parts need
// ip_vs and dummy links, which only the VM has (vm/live.vmtest.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import type { DualStackState } from '../../../src/model/proxy-state.ts';
import { prng } from '../../support/prng.ts';
import { canonicalRuleset } from '../nftables/kernel-support.ts';
import { randomState } from '../nftables/random-state.ts';

/** The `nft -f` section of render output. */
function companionScript(rendered: string): string {
  const section = rendered.split(/^(?=# )/m).find((s) => /^# nftables companion table .*nft -f\)$/m.test(s));
  if (section === undefined) throw new Error('no companion table section');
  return section.slice(section.indexOf('\n') + 1);
}

test('the rendered companion table loads with nft -f; render --since steps end where a full render does', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const seed = Number(process.env.KPROXY_SEED ?? Date.now() % 100000);
  process.stdout.write(`# ipvs companion table on the kernel: seed ${seed} (KPROXY_SEED=${seed})\n`);
  const random = prng(seed);
  const lab = new Lab('ipvs-companion');
  t.after(() => lab.destroy());
  const stepsNs = await lab.addNetns('steps');
  let state: DualStackState = randomState(random);
  const load = (ns: string, script: string) => lab.exec(ns, 'nft', ['-f', '-'], { input: script });
  await load(stepsNs, companionScript(ipvsPlanner.render(ipvsPlanner.planFull(state))));
  for (let step = 0; step < 8; step++) {
    const next = randomState(random);
    const script = companionScript(ipvsPlanner.render(ipvsPlanner.planIncremental(state, next)));
    if (script !== '') await load(stepsNs, script);
    const freshNs = await lab.addNetns(`fresh-${step}`);
    await load(freshNs, companionScript(ipvsPlanner.render(ipvsPlanner.planFull(next))));
    // Canonical: the kernel lists an interval set's elements in an order its insertion history sets.
    assert.deepEqual(
      await canonicalRuleset(lab, stepsNs),
      await canonicalRuleset(lab, freshNs),
      `seed ${seed}, step ${step}`,
    );
    state = next;
  }
});

test('incremental companion transactions with their elements by netlink leave what nft text leaves', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const lab = new Lab('ipvs-companion-nl');
  t.after(() => lab.destroy());
  const main = fileURLToPath(new URL('./companion-netlink-main.ts', import.meta.url));
  const seeds = ['21', '22', '23', '24', '25', '26'];
  const run = async (mode: 'netlink' | 'text') => {
    const ns = await lab.addNetns(mode);
    const { stdout } = await lab.exec(ns, process.execPath, [main, mode, ...seeds]);
    return { ns, batches: (JSON.parse(stdout.trim().split('\n').at(-1)!) as { batches: number }).batches };
  };
  const netlink = await run('netlink');
  const text = await run('text');
  // Most steps split (element changes, new ClientIP chains before them, dropped ones after).
  assert.ok(netlink.batches >= 3, `${netlink.batches} batches of ${seeds.length - 1} steps`);
  assert.equal(text.batches, 0);
  assert.deepEqual(await canonicalRuleset(lab, netlink.ns), await canonicalRuleset(lab, text.ns));
});
