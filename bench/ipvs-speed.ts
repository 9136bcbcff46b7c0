// IPVS section. The host kernel has no ip_vs, so this file runs itself inside the qemu VM
// (harness/vm.ts, one boot) and prints the VM's figures; inside, it measures in the VM's own
// network namespace (the IPVS netlink socket is the process's), for each N services × E endpoints
// and for one Service with --wide-endpoints endpoints (in slices of 100, as the nftables and
// iptables sections' wide point):
// - the bare load of the same state: kproxy's full render fed to `ip -batch`, `ipvsadm --restore`
//   and `nft -f` (the tools' own cost of that state), vs kproxy's cold sync (IpvsDataplane start
//   + full sync of a built state);
// - (largest N, and the wide Service) one endpoint change end to end (ModelCache update +
//   incremental sync, whose first step sweeps the real server the change before left draining),
//   median of several, vs one bare netlink call (editing a real server's weight);
// - (largest N, and the wide Service) TCP connect latency from a client namespace to the first and
//   the last service (the wide point's are both its one Service);
// - ClientIP affinity: the cold sync of A services with `sessionAffinity: ClientIP` vs the same
//   without (issue 16's question for IPVS: persistence is one attribute per virtual server).
// The VM is emulated (TCG, ~10× slower than the host and noisy): read ratios, not absolute times.
//   node --expose-gc bench/ipvs-speed.ts [--services 10000[,30000]] [--endpoints 10]
//     [--wide-endpoints 100000 (0: no wide point)] [--affinity-services 3000] [--rounds 2]
//     [--changes 7] [--connects 100]
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { IPVS_REQUEST_TIMEOUT_MS, NetlinkIpvsClient } from '../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../dataplanes/ipvs/planner.ts';
import { commandTimeoutMs, execaRunner } from '../dataplanes/shared/command-runner.ts';
import { allowance } from '../harness/emulation.ts';
import { Lab } from '../harness/netns.ts';
import { kernelRuns, runInVm } from '../harness/vm.ts';
import type { ModelCache } from '../src/model/model-cache.ts';
import type { DualStackState } from '../src/model/proxy-state.ts';
import { BENCH_NODE_IP, loadedModel } from './bench-model.ts';
import { median, reportSection, round, timeMs } from './measure.ts';
import {
  type ClusterShape,
  changedSlice,
  podIP,
  shapedCluster,
  syntheticCluster,
  syntheticService,
  withClientIPAffinity,
} from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    'wide-endpoints': { type: 'string', default: '100000' },
    'affinity-services': { type: 'string', default: '3000' },
    changes: { type: 'string', default: '7' },
    rounds: { type: 'string', default: '2' },
    connects: { type: 'string', default: '100' },
  },
});
/**
 * The VM run's bound: boot, then the syncs and loads, each ~10× the host's under TCG, and a wait
 * for IPVS's trash (200 s) after each big clean, two per point (2026-12-03, 2-core host at load
 * 3-13: 10k services ~8 min, 30k alone ~17 min with the ClientIP rounds after it; the wide
 * Service at 10,000 endpoints ~9 min; estimated for the default 1k, 10k, 30k, the wide Service of
 * 100,000 and 2 ClientIP rounds at 3,000: ~60 min, 37 of them the trash waits), twice over.
 */
const VM_TIMEOUT_MS = 120 * 60_000;
const SERVER_IP = '10.200.0.2';
const CLIENT_IP = '10.201.0.2';

if (!kernelRuns('ipvs')) {
  // The VM script's own bound (30 min by default) would cut the run short.
  process.env.IPVS_QEMU_TIMEOUT ??= String(VM_TIMEOUT_MS / 1000);
  // The figures are the last BENCH-RESULT line of the guest's console.
  const run = await runInVm(
    process.execPath,
    ['--expose-gc', import.meta.filename, ...process.argv.slice(2)],
    {
      timeoutMs: VM_TIMEOUT_MS,
      onOutput: (text) => process.stderr.write(text),
    },
  );
  const result = run.output.split('\n').findLast((l) => l.startsWith('BENCH-RESULT '));
  if (result === undefined) throw new Error(`ipvs bench: no figures from the VM (exit ${run.exitCode})`);
  process.stdout.write(`${result.trim()}\n`);
  process.exit(run.exitCode);
}

const endpoints = Number(values.endpoints);

/** The full render's sections: `ip -batch`, `ipvsadm --restore` and `nft -f` inputs. */
function bareInputs(state: DualStackState): { command: string; args: string[]; input: string }[] {
  const tools: Record<string, [string, string[]]> = {
    'ip -batch': ['ip', ['-batch', '-']],
    'ipvsadm --restore': ['ipvsadm', ['--restore']],
    'nft -f': ['nft', ['-f', '-']],
  };
  return ipvsPlanner
    .render(ipvsPlanner.planFull(state))
    .split(/^(?=# )/m)
    .map((section) => {
      const newline = section.indexOf('\n');
      const [command, args] = tools[/; ([^;]+)\)$/.exec(section.slice(0, newline))?.[1] ?? '']!;
      return { command, args, input: section.slice(newline + 1) };
    });
}

/** Times each tool loading `state` on a clean node; returns ms by tool. */
async function bareLoad(state: DualStackState): Promise<Record<string, number>> {
  const times: Record<string, number> = {};
  for (const { command, args, input } of bareInputs(state)) {
    times[command] = await timeMs(() => execa(command, args, { input }));
  }
  return times;
}

/**
 * How long IPVS keeps the real servers `ipvsadm -C` deleted: in the namespace's trash, which a
 * timer checks every 60 s and frees 120 s after the check that first saw them
 * (IP_VS_DEST_TRASH_PERIOD), so at most 180 s. Every real-server add walks that list
 * (ip_vs_trash_get_dest), so a load right after a clean of N real servers pays O(N) per add: at
 * 10k services in the VM, 191 s for the cold sync and for `ipvsadm --restore` alike against
 * 23 s on a fresh kernel (docs/benchmarks.md). A measured load after a big clean waits it out.
 */
const IPVS_TRASH_MS = 200_000;

/**
 * What any run left: virtual servers, the dummy link, the companion tables; `settle` waits out
 * the trash of the real servers it deleted (before a measured load).
 */
async function clean(settle = false): Promise<void> {
  await execa('ipvsadm', ['-C']);
  await execa('ip', ['link', 'del', 'kproxy-ipvs0'], { reject: false });
  for (const family of ['ip', 'ip6'])
    await execa('nft', ['delete', 'table', family, 'kproxy-ipvs'], { reject: false });
  if (settle) await new Promise((resolve) => setTimeout(resolve, IPVS_TRASH_MS));
}

function dataplane(): IpvsDataplane {
  // The runner's bounds are sized for a real node; every tool runs ~10-15x slower under TCG (at
  // 30k services the `ip -batch` binding 30,000 addresses outran the 30 s bound of `ip` here).
  const runner = execaRunner([], { timeoutMs: (command) => allowance(commandTimeoutMs(command)) });
  return new IpvsDataplane({ runner, openClient });
}

/** The netlink client, its bound stretched too (a dump of 30k virtual servers outran 10 s here). */
function openClient(): Promise<NetlinkIpvsClient> {
  return NetlinkIpvsClient.open({ requestTimeoutMs: allowance(IPVS_REQUEST_TIMEOUT_MS) });
}

/** kproxy's cold sync of `state` on a clean node (start + full sync), in ms; the node is left loaded. */
async function coldSync(state: DualStackState): Promise<{ ms: number; dp: IpvsDataplane }> {
  const dp = dataplane();
  const ms = await timeMs(async () => {
    await dp.start();
    await dp.sync(state, 'full');
  });
  return { ms, dp };
}

/** A client namespace routed through the node, and a server namespace answering on every pod IP. */
async function connectLab(lab: Lab): Promise<(ip: string) => Promise<number>> {
  const client = await lab.addNetns('client');
  const server = await lab.addNetns('server');
  const node = async (args: string[]) => execa('ip', args);
  await lab.ip(client, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kpbc', 'netns', '1']);
  await lab.ip(server, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kpbs', 'netns', '1']);
  for (const [ns, ip, peer, nodeIp] of [
    [client, CLIENT_IP, 'kpbc', '10.201.0.1'],
    [server, SERVER_IP, 'kpbs', BENCH_NODE_IP],
  ] as const) {
    await lab.ip(ns, ['link', 'set', 'eth0', 'up']);
    await lab.ip(ns, ['addr', 'add', `${ip}/30`, 'dev', 'eth0']);
    await lab.ip(ns, ['route', 'add', 'default', 'via', nodeIp]);
    await node(['link', 'set', peer, 'up']);
    await node(['addr', 'add', `${nodeIp}/30`, 'dev', peer]);
  }
  // A /14: the pods of a wide service run on past 10.244.255.255 (synthetic-cluster.ts).
  await node(['route', 'add', '10.244.0.0/14', 'via', SERVER_IP]);
  await lab.ip(server, ['route', 'add', 'local', '10.244.0.0/14', 'dev', 'lo']);
  await execa('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
  const echo = lab.spawn(server, process.execPath, [
    join(import.meta.dirname, '../harness/echo-server.ts'),
    'bench',
    '--tcp',
    '8080',
  ]);
  await echo.waitFor('ready');
  return async (ip) => {
    const { stdout } = await lab.exec(client, process.execPath, [
      join(import.meta.dirname, 'connect-latency.ts'),
      ip,
      '80',
      values.connects,
      '20',
    ]);
    return (JSON.parse(stdout) as { medianUs: number }).medianUs;
  };
}

/**
 * One endpoint change end to end on the loaded node, median of --changes, vs one bare netlink
 * call: a weight edit of service 0's first real server (pod 0, in every shape; no change touches
 * it), the kernel's own cost of one request on the same table.
 */
async function changeFigures(
  shape: ClusterShape,
  model: ModelCache,
  dp: IpvsDataplane,
): Promise<Record<string, number>> {
  const changeMs: number[] = [];
  for (let run = 0; run < Number(values.changes); run++) {
    // The changed slice is the API server's side: built outside the timed change.
    const slice = changedSlice(shape, run + 1);
    changeMs.push(
      await timeMs(async () => {
        model.setEndpointSlice(slice);
        const update = model.update();
        const outcome = await dp.sync(update.state, 'incremental', update.changed);
        if (outcome.kind !== 'incremental') throw new Error('the endpoint change fell back to a full sync');
      }),
    );
  }
  const client = await openClient();
  const address = syntheticService(0).spec.clusterIP;
  const service = (await client.listServices()).find((s) => s.address === address && s.port === 80);
  if (service === undefined) throw new Error(`ipvs bench: no virtual server ${address}:80`);
  const netlinkMs: number[] = [];
  for (let run = 0; run < Number(values.changes); run++) {
    const server = { address: podIP(0), port: 8080, weight: run % 2 === 0 ? 2 : 1 };
    netlinkMs.push(await timeMs(() => client.editServer(service, server)));
  }
  client.close();
  return {
    endpointChangeMedianMs: round(median(changeMs), 2),
    bareNetlinkCallMedianMs: round(median(netlinkMs), 2),
  };
}

/** Medians of connects to the first and the last service, alternating rounds (load hits both alike). */
async function connectFigures(
  latency: (ip: string) => Promise<number>,
  services: number,
): Promise<Record<string, number>> {
  const first: number[] = [];
  const last: number[] = [];
  for (let r = 0; r < 2; r++) {
    first.push(await latency(syntheticService(0).spec.clusterIP!));
    last.push(await latency(syntheticService(services - 1).spec.clusterIP!));
  }
  return { connectFirstServiceUs: round(median(first)), connectLastServiceUs: round(median(last)) };
}

const lab = new Lab(`bench-ipvs-${process.pid}`);
/** The client and server namespaces, made once, for the first point that measures connects. */
let latency: ((ip: string) => Promise<number>) | undefined;

/**
 * One point of the curve, on a node cleaned and settled by the point before: the bare load, then
 * kproxy's cold sync of the same state, and with `detailed` its change and connect figures; the
 * node is left cleaned and settled.
 */
async function measurePoint(shape: ClusterShape, detailed: boolean): Promise<Record<string, unknown>> {
  const model = loadedModel(shapedCluster(shape));
  const state = model.update().state;
  const bare = await bareLoad(state);
  await clean(true);
  const { ms: coldSyncMs, dp } = await coldSync(state);
  let figures: Record<string, unknown> = {
    services: shape.services,
    endpointsPerService: shape.endpointsPerService,
    wide: shape.wide,
    coldSyncMs: round(coldSyncMs),
    bareLoadMs: round((bare.ip ?? 0) + (bare.ipvsadm ?? 0) + (bare.nft ?? 0)),
    bareIpvsadmRestoreMs: round(bare.ipvsadm ?? 0),
    bareNftMs: round(bare.nft ?? 0),
    bareIpBatchMs: round(bare.ip ?? 0),
  };
  if (detailed) {
    figures = { ...figures, ...(await changeFigures(shape, model, dp)) };
    latency ??= await connectLab(lab);
    figures = { ...figures, ...(await connectFigures(latency, shape.services)) };
  }
  process.stderr.write(`ipvs bench: ${JSON.stringify(figures)}\n`);
  await clean(true);
  return figures;
}

try {
  await clean();
  // A first sync in this process pays for compiling and warming up its code (several times the
  // next one's cost in the VM): a small one goes first, unmeasured.
  await coldSync(
    loadedModel(syntheticCluster({ services: 100, endpointsPerService: endpoints })).update().state,
  );
  await clean();
  const counts = values.services.split(',').map(Number);
  const largest = Math.max(...counts);
  const wideEndpoints = Number(values['wide-endpoints']);
  const shapes: ClusterShape[] = [
    ...counts.map((services) => ({ services, endpointsPerService: endpoints, wide: false })),
    ...(wideEndpoints > 0 ? [{ services: 1, endpointsPerService: wideEndpoints, wide: true }] : []),
  ];
  // The change and connect figures at the largest size and for the wide Service, as in the curve.
  const sizes: Record<string, unknown>[] = [];
  for (const shape of shapes) sizes.push(await measurePoint(shape, shape.wide || shape.services === largest));

  // ClientIP affinity against plain, same size, alternating (the first of each warms up nothing).
  const affinityServices = Number(values['affinity-services']);
  const plainCluster = syntheticCluster({ services: affinityServices, endpointsPerService: endpoints });
  const states = {
    plain: loadedModel(plainCluster).update().state,
    affinity: loadedModel(withClientIPAffinity(plainCluster)).update().state,
  };
  const loads: Record<'plain' | 'affinity', number[]> = { plain: [], affinity: [] };
  const order = Array.from({ length: Number(values.rounds) }, () => ['plain', 'affinity'] as const).flat();
  for (const [i, kind] of order.entries()) {
    loads[kind].push((await coldSync(states[kind])).ms);
    await clean(i < order.length - 1);
  }

  // The table's rows: the largest N on top (its change and connect figures among them).
  const byLargest = sizes.find((s) => s.services === largest && s.wide === false) ?? {};
  reportSection({
    emulated: true,
    endpointsPerService: endpoints,
    sizes,
    ...byLargest,
    affinityServices,
    coldSyncPlainMs: round(median(loads.plain)),
    coldSyncAffinityMs: round(median(loads.affinity)),
    affinityLoads: loads,
  });
} finally {
  await lab.destroy();
  await clean();
}
