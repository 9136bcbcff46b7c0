// Kernel test (host, in a throwaway namespace): the companion nft table as `render --mode ipvs`
// prints it loads with plain `nft -f`, and a full render followed by `render --since` renders
// leaves what a full render of the last state does (`nft -j list ruleset`, canonical), and its
// ClusterIP masquerade decisions hold for real packets. The live dataplane sends exactly these
// scripts (live-render.test.ts); the IPVS and dummy-link parts need ip_vs and dummy links, which
// only the VM has (vm/live.vmtest.ts).
// Sweep its seeds (as root; the two seeded tests, or one with --name 'render --since steps' or 'by netlink'):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/companion-kernel.test.ts --name 'render --since steps|by netlink'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { DualStackState, LocalTrafficDetector } from '../../../contract/proxy-state.ts';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4, replies, Topology } from '../../../harness/topology.ts';
import { LabRequests } from '../../support/lab-requests.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { canonicalRuleset } from '../nftables/kernel-support.ts';
import { randomState } from '../nftables/random-state.ts';
import { coldStartStates } from './cold-start-states.ts';

/** Writes companion transactions inside a namespace, as the live dataplane does. */
const MAIN = fileURLToPath(new URL('./companion-netlink-main.ts', import.meta.url));

/** The `nft -f` section of render output. */
function companionScript(rendered: string): string {
  const section = rendered.split(/^(?=# )/m).find((s) => /^# nftables companion table .*nft -f\)$/m.test(s));
  if (section === undefined) throw new Error('no companion table section');
  return section.slice(section.indexOf('\n') + 1);
}

test('the rendered companion table loads with nft -f; render --since steps end where a full render does', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const seeds = testSeeds();
  process.stdout.write(seedsLine('ipvs companion table on the kernel', seeds));
  const lab = new Lab('ipvs-companion');
  t.after(() => lab.destroy());
  const stepsNs = await lab.addNetns('steps');
  // Emptied before each load: a fresh namespace's nftables, without a namespace per step and seed.
  const freshNs = await lab.addNetns('fresh');
  for (const seed of seeds) {
    const random = prng(seed);
    await lab.exec(stepsNs, 'nft', ['flush', 'ruleset']);
    let state: DualStackState = randomState(random);
    const load = (ns: string, script: string) => lab.exec(ns, 'nft', ['-f', '-'], { input: script });
    await load(stepsNs, companionScript(ipvsPlanner.render(ipvsPlanner.planFull(state))));
    for (let step = 0; step < 8; step++) {
      const next = randomState(random);
      const script = companionScript(ipvsPlanner.render(ipvsPlanner.planIncremental(state, next)));
      if (script !== '') await load(stepsNs, script);
      await lab.exec(freshNs, 'nft', ['flush', 'ruleset']);
      await load(freshNs, companionScript(ipvsPlanner.render(ipvsPlanner.planFull(next))));
      // Canonical: the kernel lists an interval set's elements in an order its insertion history sets.
      assert.deepEqual(
        await canonicalRuleset(lab, stepsNs),
        await canonicalRuleset(lab, freshNs),
        `seed ${seed}, step ${step}`,
      );
      state = next;
    }
  }
});

test('incremental companion transactions with their elements by netlink leave what nft text leaves', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  // Seed s: the states of seeds s..s+5, the first's table then five incremental steps.
  const seeds = testSeeds({ first: 21 });
  process.stdout.write(seedsLine('ipvs companion transactions by netlink', seeds));
  const lab = new Lab('ipvs-companion-nl');
  t.after(() => lab.destroy());
  const inside = new LabRequests(lab, MAIN);
  const netlinkNs = await lab.addNetns('netlink');
  const textNs = await lab.addNetns('text');
  const run = async (ns: string, mode: 'netlink' | 'text', states: string[]) => {
    // Emptied first: a sweep's seeds share the namespaces (and each one's writing process).
    await lab.exec(ns, 'nft', ['flush', 'ruleset']);
    return (await inside.request(ns, [mode, ...states])) as { batches: number; changes: number };
  };
  for (const seed of seeds) {
    const states = Array.from({ length: 6 }, (_, i) => String(seed + i));
    const netlink = await run(netlinkNs, 'netlink', states);
    const text = await run(textNs, 'text', states);
    // Every step that changes something splits (element changes, new ClientIP chains before them,
    // dropped ones after) and writes its elements as one batch; one that changes nothing writes
    // none (seed 48: three of five steps; ~6% of seeds have fewer than three that change).
    assert.equal(
      netlink.batches,
      netlink.changes,
      `seed ${seed}: ${netlink.batches} batches of ${netlink.changes} steps that change something`,
    );
    assert.equal(text.batches, 0, `seed ${seed}`);
    assert.deepEqual(
      await canonicalRuleset(lab, netlinkNs),
      await canonicalRuleset(lab, textNs),
      `seed ${seed}`,
    );
  }
});

test("a cold start's steps, its elements by netlink in many small batches, leave what its one transaction leaves", async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const lab = new Lab('ipvs-companion-cold');
  t.after(() => lab.destroy());
  const inside = new LabRequests(lab, MAIN);
  const netlinkNs = await lab.addNetns('netlink');
  const textNs = await lab.addNetns('text');
  const run = async (ns: string, mode: 'cold-netlink' | 'cold-text', name: string) => {
    await lab.exec(ns, 'nft', ['flush', 'ruleset']);
    return (await inside.request(ns, [mode, name])).batches as number;
  };
  for (const name of Object.keys(coldStartStates)) {
    const batches = await run(netlinkNs, 'cold-netlink', name);
    assert.equal(await run(textNs, 'cold-text', name), 0, name);
    assert.deepEqual(await canonicalRuleset(lab, netlinkNs), await canonicalRuleset(lab, textNs), name);
    // 300 ClientIP services: ~3,000 elements, over 100 KiB.
    if (name === 'affinity-wide') assert.ok(batches > 5, `${name}: ${batches} batches`);
  }
});

// Without ip_vs nothing DNATs, so node-0 routes the ClusterIP on to the client, which holds it:
// the address the holder sees says whether the companion table marked the first packet in
// nat-prerouting and masqueraded it in nat-postrouting (the hooks IPVS traffic passes too).
test('ClusterIP masquerade with real packets: masqueradeAll marks every source, with or without a local traffic detector', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const lab = new Lab('ipvs-companion-masq');
  t.after(() => lab.destroy());
  const topology = await Topology.create(lab, { podsPerNode: [1, 0] });
  const [node0, offCluster] = [topology.nodes[0]!, topology.nodes[1]!];
  const pod = node0.pods[0]!;
  const clusterIP = '10.96.0.10';
  const holder = topology.client.ns;
  await lab.addAddress(holder, 'lo', `${clusterIP}/32`);
  await lab.addRoute(holder, [node0.podCIDRv4, 'via', node0.ipv4]);
  await topology.startEcho({ ...pod, name: 'vip-holder', ns: holder }, { tcp: [80] });
  // node-1's address is outside the cluster CIDR: it stands for an off-cluster source.
  await lab.addRoute(offCluster.ns, [`${clusterIP}/32`, 'via', node0.ipv4]);
  const seenSource = async (ns: string): Promise<string> =>
    replies(await topology.connect(ns, 'tcp', clusterIP, 80))[0]!.peer.split(':')[0]!;
  const clusterCIDR: LocalTrafficDetector = { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] };
  const none: LocalTrafficDetector = { mode: 'None' };
  const masqueraded = node0.ipv4;
  const cases = [
    { masqueradeAll: false, localDetector: clusterCIDR, pod: pod.ipv4, offCluster: masqueraded },
    { masqueradeAll: true, localDetector: clusterCIDR, pod: masqueraded, offCluster: masqueraded },
    { masqueradeAll: true, localDetector: none, pod: masqueraded, offCluster: masqueraded },
    { masqueradeAll: false, localDetector: none, pod: pod.ipv4, offCluster: offCluster.ipv4 },
  ];
  for (const { masqueradeAll, localDetector, ...expected } of cases) {
    const web = servicePort('web', { clusterIP, clusterEndpoints: [endpoint(pod.ipv4)] });
    const state = { IPv4: proxyState('IPv4', [web], { masqueradeAll, localDetector }) };
    // A full render replaces the table: each case's connections meet only its rules.
    await lab.exec(node0.ns, 'nft', ['-f', '-'], {
      input: companionScript(ipvsPlanner.render(ipvsPlanner.planFull(state))),
    });
    assert.deepEqual(
      { pod: await seenSource(pod.ns), offCluster: await seenSource(offCluster.ns) },
      expected,
      `masqueradeAll ${masqueradeAll}, local traffic detector ${localDetector.mode}`,
    );
  }
});
