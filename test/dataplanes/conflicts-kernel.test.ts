// Kernel test: what the three planners make of random conflicting clusters (test/model/
// random-cluster.ts) loads into a kernel, full and then incrementally: nft -f for nftables,
// iptables-restore with both iptables backends, and for IPVS the companion nft table and the dummy
// link's addresses (ip -batch) in a namespace; the host has no ip_vs, so the ipvsadm lines are
// checked for ipvsadm's syntax and replayed against an in-memory table that refuses what the
// kernel refuses.
// Sweep its seeds (as root): nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/conflicts-kernel.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalIP } from '../../contract/base/ip-address.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import type { IptablesPlan } from '../../dataplanes/iptables/plan-types.ts';
import { iptablesPlanner } from '../../dataplanes/iptables/planner.ts';
import { FAMILIES, restoreInput } from '../../dataplanes/iptables/restore-plan.ts';
import type { IpvsPlan } from '../../dataplanes/ipvs/ipvs-plan.ts';
import { ipvsDesired, ipvsPlanner } from '../../dataplanes/ipvs/planner.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { buildProxyState } from '../../src/model/build-state.ts';
import { CLUSTER_OPTIONS, randomCluster } from '../model/random-cluster.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';
import { applyOps, fromDesired } from './ipvs/fake-ipvs.ts';
import { nftLoad } from './nftables/kernel-support.ts';
import { plannerAfterFullSync } from './nftables/planner-with-slots.ts';

const STEPS = 3;

/** A few consecutive states of random conflicting clusters. */
function randomStates(seed: number): DualStackState[] {
  const random = prng(seed);
  return Array.from({ length: STEPS }, () => buildProxyState(randomCluster(random), CLUSTER_OPTIONS).state);
}

/** The sections of an IPVS render by the tool each header names (a tool's sections joined, in order). */
function ipvsSections(text: string): { ipvsadm: string[]; batch: string; nft: string } {
  const sections = new Map<string, string>();
  const parts = text.split(/^(# .*)\n/m);
  for (let i = 1; i < parts.length; i += 2) {
    const tool = ['ipvsadm', 'ip -batch', 'nft -f'].find((name) => parts[i]!.includes(name));
    assert.ok(tool, `a known section: ${parts[i]}`);
    sections.set(tool, (sections.get(tool) ?? '') + (parts[i + 1] ?? ''));
  }
  const [ipvsadm, batch, nft] = ['ipvsadm', 'ip -batch', 'nft -f'].map((tool) => sections.get(tool));
  assert.ok(ipvsadm !== undefined && batch !== undefined && nft !== undefined, 'three sections');
  return { ipvsadm: ipvsadm.split('\n').filter(Boolean), batch, nft };
}

const PROTOCOL = '(?:-t|-u|--sctp-service)';
const HOST_PORT = '(\\S+)';
const IPVSADM_LINE = new RegExp(
  `^(?:-[AE] ${PROTOCOL} ${HOST_PORT} -s [a-z]+(?: -p \\d+)?|-D ${PROTOCOL} ${HOST_PORT}|-[ae] ${PROTOCOL} ${HOST_PORT} -r ${HOST_PORT} -m -w \\d+|-d ${PROTOCOL} ${HOST_PORT} -r ${HOST_PORT})$`,
);

/** What ipvsadm would parse: its grammar, canonical addresses, ports in range. */
function assertIpvsadmSyntax(lines: readonly string[], where: string): void {
  for (const line of lines) {
    const match = IPVSADM_LINE.exec(line);
    assert.ok(match, `${where}: ipvsadm line ${line}`);
    for (const hostPort of match.slice(1).filter(Boolean)) {
      const parts = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(hostPort!);
      assert.ok(parts, `${where}: address ${hostPort} in ${line}`);
      const ip = parts[1] ?? parts[2]!;
      assert.equal(canonicalIP(ip), ip, `${where}: ${ip} in ${line}`);
      const port = Number(parts[3]);
      assert.ok(port >= 1 && port <= 65535, `${where}: port in ${line}`);
    }
  }
}

test('random conflicting clusters: every planner output loads into a kernel, full and incremental', async (t) => {
  if (!requireRoot(t, 'loads nft, iptables-restore and ip -batch input into throwaway namespaces')) return;
  const seeds = testSeeds({ count: 4 });
  process.stdout.write(seedsLine('conflicts on the kernel', seeds));
  for (const seed of seeds) {
    // A lab per seed: a sweep's namespaces go as it goes.
    const lab = new Lab(`conflicts-${seed}`);
    try {
      const states = randomStates(seed);
      const nft = await lab.addNetns(`nft-${seed}`);
      const ipvs = await lab.addNetns(`ipvs-${seed}`);
      const iptables = {
        nft: await lab.addNetns(`iptnft-${seed}`),
        legacy: await lab.addNetns(`iptlegacy-${seed}`),
      };
      let table = fromDesired(ipvsDesired({}, { scheduler: 'rr' }));
      // As the live dataplane: each nftables plan starts from the endpoint slots the ones before it left.
      const nftPlanner = plannerAfterFullSync();
      for (let step = 0; step < states.length; step++) {
        const where = `seed ${seed}, step ${step}`;
        const prev = states[step - 1];
        const next = states[step]!;
        const plan = <P>(planner: {
          planFull(s: DualStackState): P;
          planIncremental(a: DualStackState, b: DualStackState): P;
        }) => (prev === undefined ? planner.planFull(next) : planner.planIncremental(prev, next));
        const load = async (what: string, run: () => Promise<unknown>) => {
          try {
            await run();
          } catch (error) {
            assert.fail(`${where}: ${what} rejected its input: ${(error as Error).message.slice(0, 3000)}`);
          }
        };

        await load('nft (nftables)', () => nftLoad(lab, nft, nftPlanner.render(plan(nftPlanner))));

        const iptablesPlan: IptablesPlan = plan(iptablesPlanner);
        for (const backend of ['nft', 'legacy'] as const) {
          for (const family of FAMILIES) {
            const familyPlan = iptablesPlan[family];
            const input = familyPlan && restoreInput(familyPlan);
            if (!input) continue;
            const tool = `${family === 'IPv4' ? 'iptables' : 'ip6tables'}-${backend}-restore`;
            await load(tool, () => lab.exec(iptables[backend], tool, ['--noflush'], { input }));
          }
        }

        const ipvsPlan: IpvsPlan = plan(ipvsPlanner);
        const sections = ipvsSections(ipvsPlanner.render(ipvsPlan));
        await load('nft (IPVS companion table)', () => nftLoad(lab, ipvs, sections.nft));
        // The host kernel may lack the dummy module: a bridge takes the link's place (the addresses
        // are what is checked).
        const batch = sections.batch.replace(/^(link add \S+ type) dummy$/m, '$1 bridge');
        if (batch !== '')
          await load('ip -batch', () => lab.exec(ipvs, 'ip', ['-batch', '-'], { input: batch }));
        assertIpvsadmSyntax(sections.ipvsadm, where);
        if (ipvsPlan.kind === 'full') {
          const services = sections.ipvsadm.filter((line) => line.startsWith('-A '));
          assert.equal(new Set(services).size, services.length, `${where}: a virtual server added twice`);
          table = fromDesired(ipvsPlan.desired);
        } else {
          try {
            applyOps(table, ipvsPlan.ops);
          } catch (error) {
            assert.fail(`${where}: IPVS would refuse: ${(error as Error).message}`);
          }
        }
      }
    } finally {
      await lab.destroy();
    }
  }
});
