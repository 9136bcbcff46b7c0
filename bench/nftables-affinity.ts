// nftables section for ClientIP affinity (issue 16): N ClusterIP services × E endpoints, the same
// cluster with and without `sessionAffinity: ClientIP`, in one run so the ratio compares like with
// like on a busy machine:
// - the bare `nft -f` load of the full ruleset (rendered beforehand) into a fresh namespace,
//   alternating the two clusters, median of `--rounds`;
// - one endpoint change (the fragments plan, indexes kept as the live dataplane keeps them,
//   rendered and loaded with `nft -f`), median of `--changes`, on an affinity service and on a
//   plain one of the same cluster, alternating.
//   node bench/nftables-affinity.ts [--services 3000] [--endpoints 10] [--rounds 3] [--changes 15]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runAll } from '../contract/base/work-slices.ts';
import type { DualStackState, ServicePort } from '../contract/proxy-state.ts';
import type { FragmentIndex } from '../dataplanes/nftables/fragment-index.ts';
import { incrementalPlanSteps, nftablesPlanner } from '../dataplanes/nftables/planner.ts';
import type { NftFamily } from '../dataplanes/shared/nft/transaction.ts';
import { Lab } from '../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../harness/proxy-states.ts';
import { median, reportSection, round, timeMs } from './measure.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '3000' },
    endpoints: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    changes: { type: 'string', default: '15' },
  },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);

function address(base: number, i: number): string {
  return `10.${base + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
}

function port(i: number, affinity: boolean, skip = -1): ServicePort {
  const eps = Array.from({ length: endpoints }, (_, e) => e)
    .filter((e) => e !== skip)
    .map((e) => endpoint(address(128, i * endpoints + e), 8080));
  return servicePort(`s${i}`, {
    clusterIP: address(96, i),
    clusterEndpoints: eps,
    ...(affinity && { sessionAffinity: { timeoutSeconds: 10800 } }),
  });
}

function cluster(affinity: boolean): DualStackState {
  return ipv4(Array.from({ length: services }, (_, i) => port(i, affinity)));
}

const lab = new Lab('nftaffbench');
const dir = mkdtempSync(join(tmpdir(), 'kproxy-affinity-bench-'));
try {
  const files = { plain: join(dir, 'plain.nft'), affinity: join(dir, 'affinity.nft') };
  const states = { plain: cluster(false), affinity: cluster(true) };
  for (const kind of ['plain', 'affinity'] as const) {
    writeFileSync(files[kind], nftablesPlanner.render(nftablesPlanner.planFull(states[kind])));
  }
  const loads: Record<'plain' | 'affinity', number[]> = { plain: [], affinity: [] };
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const kind of ['plain', 'affinity'] as const) {
      const ns = await lab.addNetns(`${kind}-${r}`);
      loads[kind].push(await timeMs(() => lab.exec(ns, 'nft', ['-f', files[kind]])));
      await lab.exec(ns, 'nft', ['flush', 'ruleset']);
    }
  }
  // One endpoint of service 0 goes away and comes back, in the cluster with affinity; service 0
  // of a cluster mixing both shows the plain cost beside it.
  const mixed = ipv4(Array.from({ length: services }, (_, i) => port(i, i % 2 === 1)));
  const ns = await lab.addNetns('changes');
  await lab.exec(ns, 'nft', ['-f', '-'], { input: nftablesPlanner.render(nftablesPlanner.planFull(mixed)) });
  // One change of service i at a time (its endpoint 0 goes, then comes back, and so on).
  const toggler = (i: number): (() => Promise<number>) => {
    // By key: the state lists its ports in key order (s0, s1, s10, …), not by i.
    const changed = port(i, i % 2 === 1, 0);
    const without = ipv4(
      [...mixed.IPv4!.servicePorts.values()].map((sp) => (sp.key === changed.key ? changed : sp)),
    );
    // As the live dataplane: the fragment indexes are kept from one change to the next.
    const indexes = new Map<NftFamily, FragmentIndex | 'collisions'>();
    runAll(incrementalPlanSteps(mixed, mixed, { indexes, changed: new Set([changed.key]) }));
    let c = 0;
    return () => {
      const [from, to] = c++ % 2 === 0 ? [mixed, without] : [without, mixed];
      return timeMs(async () => {
        const plan = runAll(incrementalPlanSteps(from, to, { indexes }));
        await lab.exec(ns, 'nft', ['-f', '-'], { input: nftablesPlanner.render(plan) });
        plan.commit?.();
      });
    };
  };
  // Alternating, so a change of the machine's load weighs on both alike.
  const changes = { plain: toggler(0), affinity: toggler(1) };
  const changeTimes: Record<'plain' | 'affinity', number[]> = { plain: [], affinity: [] };
  for (let c = 0; c < Number(values.changes); c++) {
    for (const kind of ['plain', 'affinity'] as const) changeTimes[kind].push(await changes[kind]());
  }
  const plainChange = median(changeTimes.plain);
  const affinityChange = median(changeTimes.affinity);
  const plainLoad = median(loads.plain);
  const affinityLoad = median(loads.affinity);
  reportSection({
    services,
    endpoints,
    loadPlainMs: round(plainLoad),
    loadAffinityMs: round(affinityLoad),
    loadRatio: round(affinityLoad / plainLoad, 2),
    endpointChangePlainMs: round(plainChange),
    endpointChangeAffinityMs: round(affinityChange),
    loads,
    changes: changeTimes,
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
  await lab.destroy();
}
