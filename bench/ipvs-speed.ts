// IPVS section. The host kernel has no ip_vs, so this file runs itself inside the qemu VM
// (harness/vm.ts, one boot) and prints the VM's figures; inside, it measures in the VM's own
// network namespace (the IPVS netlink socket is the process's), for each N services × E endpoints:
// - the bare load of the same state: kproxy's full render fed to `ip -batch`, `ipvsadm --restore`
//   and `nft -f` (the tools' own cost of that state), vs kproxy's cold sync (IpvsDataplane start
//   + full sync of a built state);
// - (largest N) one endpoint change end to end (ModelCache update + incremental sync, whose first
//   step sweeps the real server the change before left draining), median of several, vs one bare
//   netlink call (editing a real server's weight);
// - (largest N) TCP connect latency from a client namespace to the first and the last service;
// - ClientIP affinity: the cold sync of A services with `sessionAffinity: ClientIP` vs the same
//   without (issue 16's question for IPVS: persistence is one attribute per virtual server).
// The VM is emulated (TCG, ~10× slower than the host and noisy): read ratios, not absolute times.
//   node --expose-gc bench/ipvs-speed.ts [--services 10000[,30000]] [--endpoints 10]
//     [--affinity-services 3000] [--rounds 2] [--changes 7] [--connects 100]
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
import type { DualStackState } from '../src/model/proxy-state.ts';
import { BENCH_NODE_IP, loadedModel } from './bench-model.ts';
import { median, reportSection, round, timeMs } from './measure.ts';
import {
  syntheticCluster,
  syntheticService,
  syntheticSlice,
  withClientIPAffinity,
} from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    'affinity-services': { type: 'string', default: '3000' },
    changes: { type: 'string', default: '7' },
    rounds: { type: 'string', default: '2' },
    connects: { type: 'string', default: '100' },
  },
});
/**
 * The VM run's bound: boot, then the syncs and loads, each ~10× the host's under TCG, and a wait
 * for IPVS's trash after each big clean (2026-12-03, 2-core host at load 3-13: 10k services ~8
 * min, 30k alone ~17 min with the ClientIP rounds after it).
 */
const VM_TIMEOUT_MS = 90 * 60_000;
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
  await node(['route', 'add', '10.244.0.0/16', 'via', SERVER_IP]);
  await lab.ip(server, ['route', 'add', 'local', '10.244.0.0/16', 'dev', 'lo']);
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

const lab = new Lab(`bench-ipvs-${process.pid}`);
try {
  await clean();
  // A first sync in this process pays for compiling and warming up its code (several times the
  // next one's cost in the VM): a small one goes first, unmeasured.
  await coldSync(
    loadedModel(syntheticCluster({ services: 100, endpointsPerService: endpoints })).update().state,
  );
  await clean();
  const sizes: Record<string, unknown>[] = [];
  const counts = values.services.split(',').map(Number);
  const largest = Math.max(...counts);
  let change: Record<string, unknown> = {};
  for (const services of counts) {
    const model = loadedModel(syntheticCluster({ services, endpointsPerService: endpoints }));
    let state = model.update().state;
    const bare = await bareLoad(state);
    await clean(true);
    const { ms: coldSyncMs, dp } = await coldSync(state);
    sizes.push({
      services,
      coldSyncMs: round(coldSyncMs),
      bareLoadMs: round((bare.ip ?? 0) + (bare.ipvsadm ?? 0) + (bare.nft ?? 0)),
      bareIpvsadmRestoreMs: round(bare.ipvsadm ?? 0),
      bareNftMs: round(bare.nft ?? 0),
      bareIpBatchMs: round(bare.ip ?? 0),
    });
    process.stderr.write(`ipvs bench: ${JSON.stringify(sizes.at(-1))}\n`);
    if (services === largest) {
      // One endpoint of the middle service toggles between two pod IPs: every run is a real change.
      const changed = Math.floor(services / 2);
      const changeMs: number[] = [];
      for (let run = 0; run < Number(values.changes); run++) {
        changeMs.push(
          await timeMs(async () => {
            model.setEndpointSlice(syntheticSlice(changed, endpoints, 3, (run + 1) % 2));
            const update = model.update();
            state = update.state;
            const outcome = await dp.sync(update.state, 'incremental');
            if (outcome.kind !== 'incremental')
              throw new Error('the endpoint change fell back to a full sync');
          }),
        );
      }
      const client = await openClient();
      const [service] = (await client.listServices()).filter((s) => s.port === 80);
      const [server] = await client.listServers(service!);
      const netlinkMs: number[] = [];
      for (let run = 0; run < Number(values.changes); run++) {
        const weight = run % 2 === 0 ? 2 : 1;
        netlinkMs.push(await timeMs(() => client.editServer(service!, { ...server!, weight })));
      }
      client.close();
      const latency = await connectLab(lab);
      const first: number[] = [];
      const last: number[] = [];
      // Alternating rounds, so that load from elsewhere hits both targets alike.
      for (let r = 0; r < 2; r++) {
        first.push(await latency(syntheticService(0).spec.clusterIP!));
        last.push(await latency(syntheticService(services - 1).spec.clusterIP!));
      }
      change = {
        endpointChangeMedianMs: round(median(changeMs), 2),
        bareNetlinkCallMedianMs: round(median(netlinkMs), 2),
        connectFirstServiceUs: round(median(first)),
        connectLastServiceUs: round(median(last)),
      };
      process.stderr.write(`ipvs bench: ${JSON.stringify(change)}\n`);
    }
    await clean(true);
  }

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

  const byLargest = sizes.find((s) => s.services === largest) ?? {};
  reportSection({
    emulated: true,
    endpointsPerService: endpoints,
    sizes,
    ...byLargest,
    ...change,
    affinityServices,
    coldSyncPlainMs: round(median(loads.plain)),
    coldSyncAffinityMs: round(median(loads.affinity)),
    affinityLoads: loads,
  });
} finally {
  await lab.destroy();
  await clean();
}
