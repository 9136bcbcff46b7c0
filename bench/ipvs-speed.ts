// IPVS section. The host kernel has no ip_vs, so this file runs itself inside the qemu VM
// (harness/vm.ts, one boot) and prints the VM's figures; inside, each load runs in a child process
// in network namespaces made for it (bench/ipvs-loads.ts: IPVS state, its trash of deleted real
// servers included, is per namespace, and the IPVS netlink socket is the process's), for each
// N services × E endpoints and for one Service with --wide-endpoints endpoints (in slices of 100,
// as the nftables and iptables sections' wide point):
// - the bare load of the same state: kproxy's full render fed to `ip -batch`, `ipvsadm --restore`
//   and `nft -f` (the tools' own cost of that state), vs kproxy's cold sync (IpvsDataplane start
//   + full sync of a built state);
// - one endpoint change end to end (ModelCache update +
//   incremental sync, whose first step sweeps the real server the change before left draining),
//   median of several, vs one bare netlink call (editing a real server's weight);
// - TCP connect latency from a client namespace to the first and
//   the last service (the wide point's are both its one Service);
// - ClientIP affinity: the cold sync of A services with `sessionAffinity: ClientIP` vs the same
//   without (issue 16's question for IPVS: persistence is one attribute per virtual server).
// The VM is emulated (TCG, ~10× slower than the host and noisy): read ratios, not absolute times.
//   node --expose-gc bench/ipvs-speed.ts [--services 10000[,30000] (0: none)] [--endpoints 10]
//     [--wide-endpoints 100000 (0: no wide point)] [--affinity-services 3000] [--rounds 2]
//     [--changes 7] [--connects 100]
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import type { DualStackState } from '../contract/proxy-state.ts';
import { COMPANION_TABLE, companionSets } from '../dataplanes/ipvs/companion-ruleset.ts';
import { IPVS_REQUEST_TIMEOUT_MS, NetlinkIpvsClient } from '../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../dataplanes/ipvs/planner.ts';
import { commandTimeoutMs, execaRunner } from '../dataplanes/shared/command-runner.ts';
import { NetlinkElementWriter } from '../dataplanes/shared/nft/netlink-elements.ts';
import { allowance } from '../harness/emulation.ts';
import { Lab } from '../harness/netns.ts';
import { kernelRuns, runInVm } from '../harness/vm.ts';
import type { ModelCache } from '../src/model/model-cache.ts';
import { BENCH_NODE_IP, loadedModel } from './bench-model.ts';
import { type IpvsLoad, type IpvsLoadPart, ipvsLoads, loadParts } from './ipvs-loads.ts';
import { median, reportSection, round, timeMs } from './measure.ts';
import {
  type ClusterShape,
  changedSlice,
  podIP,
  type SyntheticCluster,
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
    // Inside the VM, one load in a child process (below): the load, and its bare load's namespace.
    load: { type: 'string' },
    part: { type: 'string' },
  },
});
/**
 * The VM run's bound: boot, then the syncs and loads, each ~10× the host's under TCG. Estimated
 * ~25 min for the default 1k, 10k, 30k, the wide Service of 100,000 and 2 ClientIP rounds at
 * 3,000 (2026-12-03: ~60 min when each point waited 200 s for IPVS's trash twice, 37 of them
 * those waits; a smoke run of 200 services, a wide Service of 10,000 and the two rounds took
 * 1,660 s then and 265 s with a namespace per part), with room to spare.
 */
const VM_TIMEOUT_MS = 120 * 60_000;
const SERVER_IP = '10.200.0.2';
const CLIENT_IP = '10.201.0.2';

if (!kernelRuns('ipvs')) {
  // The VM script's own bound (30 min by default) would cut the run short.
  process.env.IPVS_QEMU_TIMEOUT ??= String(VM_TIMEOUT_MS / 1000);
  // The figures are the last BENCH-RESULT line of the guest's console, where the console's own
  // escape sequences (a reset and a clear screen as the guest's userland starts) may come before it.
  const run = await runInVm(
    process.execPath,
    ['--expose-gc', import.meta.filename, ...process.argv.slice(2)],
    {
      timeoutMs: VM_TIMEOUT_MS,
      onOutput: (text) => process.stderr.write(text),
    },
  );
  const result = run.output.split('\n').findLast((l) => l.includes('BENCH-RESULT '));
  if (result === undefined) throw new Error(`ipvs bench: no figures from the VM (exit ${run.exitCode})`);
  process.stdout.write(`${result.slice(result.indexOf('BENCH-RESULT ')).trim()}\n`);
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

/** Times each tool loading `state` on this clean node; returns ms by tool. */
async function bareLoad(state: DualStackState): Promise<Record<string, number>> {
  const times: Record<string, number> = {};
  for (const { command, args, input } of bareInputs(state)) {
    times[command] = await timeMs(() => execa(command, args, { input }));
  }
  return times;
}

/**
 * What a load left in its namespace: virtual servers, the dummy link, the companion tables.
 * Cleaned before the namespace goes, so that the kernel does not tear a loaded one down in the
 * background of the next load; nothing waits for IPVS's trash (each load has its own namespace).
 */
async function clean(): Promise<void> {
  await execa('ipvsadm', ['-C']);
  await execa('ip', ['link', 'del', 'kproxy-ipvs0'], { reject: false });
  for (const family of ['ip', 'ip6'])
    await execa('nft', ['delete', 'table', family, 'kproxy-ipvs'], { reject: false });
}

function dataplane(): IpvsDataplane {
  // The runner's bounds are sized for a real node; every tool runs ~10-15x slower under TCG (at
  // 30k services the `ip -batch` binding 30,000 addresses outran the 30 s bound of `ip` here).
  const runner = execaRunner([], { timeoutMs: (command) => allowance(commandTimeoutMs(command)) });
  // As the daemon: the companion table's incremental elements by netlink (this process runs in
  // the load's namespace).
  const elements = NetlinkElementWriter.open(COMPANION_TABLE, companionSets);
  return new IpvsDataplane({ runner, openClient, elements });
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

/**
 * A client namespace routed through the node (this process's namespace), and a server namespace
 * answering on every pod IP.
 */
async function connectLab(lab: Lab): Promise<(ip: string) => Promise<number>> {
  const client = await lab.addNetns('client');
  const server = await lab.addNetns('server');
  const node = async (args: string[]) => execa('ip', args);
  const here = String(process.pid);
  await lab.ip(client, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kpbc', 'netns', here]);
  await lab.ip(server, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kpbs', 'netns', here]);
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

/** The cluster a load builds. */
function loadCluster(load: IpvsLoad): SyntheticCluster {
  const cluster = shapedCluster(load.shape);
  return load.affinity ? withClientIPAffinity(cluster) : cluster;
}

/**
 * One part of a load, in this process's fresh namespace: the bare load of a point's state, or
 * kproxy's cold sync of it, with its change and connect figures when `detailed`.
 */
async function measurePart(load: IpvsLoad, part: IpvsLoadPart): Promise<Record<string, unknown>> {
  const model = loadedModel(loadCluster(load));
  const state = model.update().state;
  if (part === 'bare') {
    const bare = await bareLoad(state);
    await clean();
    return {
      bareLoadMs: round((bare.ip ?? 0) + (bare.ipvsadm ?? 0) + (bare.nft ?? 0)),
      bareIpvsadmRestoreMs: round(bare.ipvsadm ?? 0),
      bareNftMs: round(bare.nft ?? 0),
      bareIpBatchMs: round(bare.ip ?? 0),
    };
  }
  // A first sync in a process pays for compiling and warming up its code (several times the next
  // one's cost in the VM): a small one goes first, unmeasured, with one real server per service
  // so that the trash it leaves in this namespace is 100 entries (each later add walks it).
  await coldSync(loadedModel(syntheticCluster({ services: 100, endpointsPerService: 1 })).update().state);
  await clean();
  const { ms: coldSyncMs, dp } = await coldSync(state);
  let figures: Record<string, unknown> = { coldSyncMs: round(coldSyncMs) };
  if (load.detailed) {
    figures = { ...figures, ...(await changeFigures(load.shape, model, dp)) };
    const lab = new Lab(`bench-ipvs-${process.pid}`);
    try {
      figures = { ...figures, ...(await connectFigures(await connectLab(lab), load.shape.services)) };
    } finally {
      await lab.destroy();
    }
  }
  await clean();
  return figures;
}

const LOAD_RESULT = 'IPVS-LOAD ';

/**
 * Runs a part of `load` in a child process in a namespace made for it, deleted after: IPVS keeps
 * deleted real servers in a per-namespace trash for up to 180 s (a timer checks it every 60 s
 * and frees them 120 s after, IP_VS_DEST_TRASH_PERIOD), and every real-server add walks it
 * (ip_vs_trash_get_dest), so a load right after a clean of N real servers pays O(N) per add (at
 * 10k services in the VM, 191 s for the cold sync and `ipvsadm --restore` alike against 23 s on a
 * fresh kernel, docs/benchmarks-log.md). A fresh namespace has an empty trash: no load waits. A
 * point's bare load and cold sync are two parts, each in its own namespace (the tools run as
 * before, no nsenter or `ip netns exec` timed with them).
 */
async function inFreshNamespace(
  load: IpvsLoad,
  part: string,
  index: number,
): Promise<Record<string, unknown>> {
  const lab = new Lab(`ipvs-load-${index}-${part}`);
  try {
    const ns = await lab.addNetns('node');
    const { stdout } = await execa(
      'ip',
      [
        'netns',
        'exec',
        ns,
        process.execPath,
        '--expose-gc',
        import.meta.filename,
        ...process.argv.slice(2),
        ...['--load', JSON.stringify(load), '--part', part],
      ],
      { stderr: 'inherit' },
    );
    const line = stdout.split('\n').findLast((l) => l.startsWith(LOAD_RESULT));
    if (line === undefined) throw new Error(`ipvs bench: load ${index} (${part}) printed no figures`);
    return JSON.parse(line.slice(LOAD_RESULT.length)) as Record<string, unknown>;
  } finally {
    await lab.destroy();
    await idleCpu();
  }
}

/**
 * Waits (up to a minute) until the VM's CPU is idle for half a second: a deleted namespace is torn
 * down by a kernel worker after `ip netns del` returns, which the next load must not compete with.
 */
async function idleCpu(): Promise<void> {
  const busyAndTotal = async (): Promise<[number, number]> => {
    const fields = (await readFile('/proc/stat', 'utf8'))
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const total = fields.reduce((sum, n) => sum + n, 0);
    return [total - fields[3]! - (fields[4] ?? 0), total];
  };
  for (const started = Date.now(); Date.now() - started < 60_000; ) {
    const [busy0, total0] = await busyAndTotal();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const [busy1, total1] = await busyAndTotal();
    if (total1 > total0 && (busy1 - busy0) / (total1 - total0) < 0.2) return;
  }
}

if (values.load !== undefined) {
  const figures = await measurePart(
    JSON.parse(values.load) as IpvsLoad,
    (values.part ?? 'cold') as IpvsLoadPart,
  );
  process.stdout.write(`${LOAD_RESULT}${JSON.stringify(figures)}\n`);
  process.exit(0);
}

const counts = values.services.split(',').map(Number);
const largest = Math.max(...counts);
const affinityServices = Number(values['affinity-services']);
const loads = ipvsLoads({
  services: counts,
  endpointsPerService: endpoints,
  wideEndpoints: Number(values['wide-endpoints']),
  affinityServices,
  rounds: Number(values.rounds),
});
const sizes: Record<string, unknown>[] = [];
const affinityLoads: Record<'plain' | 'affinity', number[]> = { plain: [], affinity: [] };
for (const [index, load] of loads.entries()) {
  let figures: Record<string, unknown> = {};
  for (const part of loadParts(load))
    figures = { ...figures, ...(await inFreshNamespace(load, part, index)) };
  if (load.kind === 'affinity-round') {
    affinityLoads[load.affinity ? 'affinity' : 'plain'].push(figures.coldSyncMs as number);
    continue;
  }
  const { services, endpointsPerService, wide } = load.shape;
  figures = { services, endpointsPerService, wide, ...figures };
  process.stderr.write(`ipvs bench: ${JSON.stringify(figures)}\n`);
  sizes.push(figures);
}
// The table's rows: the largest N on top (its change and connect figures among them).
const byLargest = sizes.find((s) => s.services === largest && s.wide === false) ?? {};
reportSection({
  emulated: true,
  endpointsPerService: endpoints,
  sizes,
  ...byLargest,
  affinityServices,
  coldSyncPlainMs: round(median(affinityLoads.plain)),
  coldSyncAffinityMs: round(median(affinityLoads.affinity)),
  affinityLoads,
});
