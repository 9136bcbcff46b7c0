// Daemon section: the real `kproxy run` (nftables mode) at N services × E endpoints, measured as a
// user would see it: the RSS of the daemon's process (`ps`, /proc/<pid>/status), not a heap figure.
// - the synthetic cluster is written as one JSON List (streamed, never built in memory) and served
//   by the stand-in API server, both inside a throwaway network namespace;
// - the daemon runs in the same namespace (`nsenter --net=…`, which execs: the PID is node's own)
//   with the daemon tests' configuration, pointed at the server with --master. It runs as the
//   systemd unit runs it: installed (`kproxy install --root` into a scratch directory, so compiled
//   to JavaScript) with the unit's environment; --as-command as its `kproxy` command (/usr/sbin/kproxy,
//   the container image's entrypoint) runs it; --checkout runs bin/kproxy.ts from this checkout;
// - time to first sync: daemon spawn → kubeproxy_sync_proxy_rules_last_timestamp_seconds (set only
//   by a successful sync; the sync loop starts only once the informers hold every object), beside
//   the bare list of the same objects from the same server (bare-list.ts);
// - /healthz latency (healthz-probe.ts, every 10 ms, open loop): p50/p99/max from the daemon's
//   start to its first sync's end, and p99/max over the idle time after it: the event loop's
//   stalls as a load balancer's probe sees them;
// - then idle, and VmRSS (settled), VmHWM (peak), RssAnon, RssFile of the daemon's process.
//   node bench/daemon-memory.ts [--services 30000] [--endpoints 10] [--nodes 100] [--idle 15]
//     [--timeout 300] [--log FILE] [--checkout | --as-command] [--probes FILE] [--node-flags="--trace-gc …"] [--turns]
//     [--env NAME=VALUE …]
//   (--log: the daemon's own output, kept; --probes: the probe's answers and the daemon's spawn and
//   first sync times, as JSON, to line stalls up with that log; --node-flags: diagnostic V8 flags
//   added to the daemon's, e.g. --trace-gc or --cpu-prof --cpu-prof-dir=DIR; --turns: the daemon's
//   long event-loop turns during the cold start by cause, from its main thread's CPU time
//   (event-loop-turns.ts, preloaded): a figure the machine's other load does not inflate; --env:
//   the daemon's environment over the unit's, e.g. an allocator to compare, repeatable)
//   Besides memory: the daemon's CPU time (user + system) at its first sync, what an allocator or a
//   flag costs the cold start whatever else the machine runs.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Lab, type LabProcess } from '../harness/netns.ts';
import {
  API,
  CONFIG,
  firstSyncAt,
  fromCheckout,
  installed,
  installedCommand,
  NODE_BIN,
  processMemoryMiB,
  sample,
  scrape,
  spawnDaemon,
  startApiServer,
} from './daemon-process.ts';
import type { Collection, Turn } from './event-loop-turns.ts';
import { percentile, reportSection, round } from './measure.ts';
import { writeClusterList } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '30000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    idle: { type: 'string', default: '15' },
    timeout: { type: 'string', default: '300' },
    log: { type: 'string' },
    checkout: { type: 'boolean', default: false },
    'as-command': { type: 'boolean', default: false },
    probes: { type: 'string' },
    'node-flags': { type: 'string', default: '' },
    turns: { type: 'boolean', default: false },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const extraEnv = Object.fromEntries(
  values.env.map((pair) => {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`--env ${pair}: not NAME=VALUE`);
    return [pair.slice(0, at), pair.slice(at + 1)];
  }),
);
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const nodes = Number(values.nodes);
const IDLE_SECONDS = Number(values.idle);
const TIMEOUT_MS = Number(values.timeout) * 1000;

const HEALTHZ = 'http://127.0.0.1:10256/healthz';
const PROBE_MAIN = join(import.meta.dirname, 'healthz-probe.ts');
const BARE_LIST_MAIN = join(import.meta.dirname, 'bare-list.ts');
const TURNS_MAIN = join(import.meta.dirname, 'event-loop-turns.ts');

/** The PID among `pid` and its descendants whose command line runs `entry` (nsenter execs, so `pid`). */
function daemonPid(pid: number, entry: string): number | undefined {
  const cmdline = (p: number) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  };
  const children = (p: number) => {
    const file = `/proc/${p}/task/${p}/children`;
    return existsSync(file) ? readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number) : [];
  };
  const queue = [pid];
  for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
    if (cmdline(p).includes(entry)) return p;
    queue.push(...children(p));
  }
  return undefined;
}

/** The CPU time (user + system, seconds) `pid` has used: /proc/<pid>/stat's utime and stime. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name (in parentheses, which may hold spaces): utime is the 14th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100; // USER_HZ on Linux
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/**
 * Latency percentiles of the /healthz answers the probe (healthz-probe.ts) printed: those due
 * before the first sync ended (the cold start, judged against 100 ms), and the worst after it
 * (fragment indexes, memory given back).
 */
function healthzFigures(output: string, syncedAt: number): Record<string, number> {
  const line = output.trim().split('\n').pop() ?? '';
  const { answers } = JSON.parse(line) as { answers: [number, number][] };
  const during = answers.filter(([due]) => due <= syncedAt).map(([, ms]) => ms);
  const after = answers.filter(([due]) => due > syncedAt).map(([, ms]) => ms);
  if (during.length === 0) throw new Error('the /healthz probe got no answer during the cold start');
  return {
    healthzProbes: during.length,
    healthzP50Ms: percentile(during, 50),
    healthzP99Ms: percentile(during, 99),
    healthzMaxMs: Math.max(...during),
    ...(after.length > 0 && {
      healthzAfterP99Ms: percentile(after, 99),
      healthzAfterMaxMs: Math.max(...after),
    }),
  };
}

/**
 * The daemon's turns of more than 100 ms (event-loop-turns.ts) while /healthz was probed during
 * the cold start, by cause: mostly inside a collection, mostly the main thread's own CPU (kproxy's
 * work, or a collection's main-thread part), or neither (the process was not running: the
 * machine's load); and the most main-thread CPU one turn took.
 */
function turnFigures(file: string, from: number, to: number): Record<string, number> {
  const { turns, collections } = JSON.parse(readFileSync(file, 'utf8')) as {
    turns: Turn[];
    collections: Collection[];
  };
  const during = turns.filter(([start]) => start >= from && start <= to);
  const collecting = (start: number, wall: number) =>
    collections.filter(([at]) => at >= start && at <= start + wall).reduce((sum, [, ms]) => sum + ms, 0);
  const long = during.filter(([, wall]) => wall > 100);
  const inCollections = long.filter(([start, wall]) => collecting(start, wall) > wall / 2);
  const ownCpu = long.filter(([start, wall, cpu]) => collecting(start, wall) <= wall / 2 && cpu > wall / 2);
  return {
    turnCpuMaxMs: Math.max(0, ...during.map(([, , cpu]) => cpu)),
    turnsOver100Ms: long.length,
    turnsOver100MsInCollections: inCollections.length,
    turnsOver100MsOwnCpu: ownCpu.length,
    turnsOver100MsNotRunning: long.length - inCollections.length - ownCpu.length,
  };
}

interface SyncLine {
  readonly kind?: string;
  readonly durationMs?: number;
  readonly servicePorts?: number;
  readonly endpoints?: number;
  readonly objects?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const lab = new Lab(`bench-daemon-${process.pid}`);
const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-daemon-'));
let daemon: ChildProcess | undefined;
let api: LabProcess | undefined;
// The daemon is not a Lab process (it is spawned through nsenter): kill it however this one ends.
const killDaemon = () => {
  if (daemon && daemon.exitCode === null && daemon.signalCode === null && daemon.pid !== undefined) {
    try {
      process.kill(daemon.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
};
process.on('exit', killDaemon);
try {
  const data = join(dir, 'cluster.json');
  await writeClusterList(data, { services, endpointsPerService: endpoints, nodes });
  const config = join(dir, 'config.yaml');
  const turnsFile = join(dir, 'turns.json');
  writeFileSync(config, CONFIG);

  const ns = await lab.addNetns('node'); // loopback is up
  api = await startApiServer(lab, ns, data, TIMEOUT_MS);

  // The bare list of the same objects (bare-list.ts), twice: the second, with the server's code as
  // warm as the daemon will find it, is the figure. The first sync is judged against it plus the
  // nftables section's bare `nft -f` of the same cluster.
  let bareList: { listMs: number; services: number } | undefined;
  for (let run = 0; run < 2; run++) {
    bareList = JSON.parse((await lab.exec(ns, NODE_BIN, [BARE_LIST_MAIN, API])).stdout);
  }
  if (bareList?.services !== services) throw new Error(`bare list: ${JSON.stringify(bareList)}`);

  const command = values.checkout
    ? fromCheckout()
    : values['as-command']
      ? await installedCommand(join(dir, 'root'))
      : await installed(join(dir, 'root'));
  // /healthz probed every 10 ms from the daemon's start to the end of its cold start's aftermath.
  const probe = lab.spawn(ns, NODE_BIN, [PROBE_MAIN, HEALTHZ, '--every', '10']);
  await probe.waitFor('probing', TIMEOUT_MS);
  const spawnedAt = Date.now();
  const child = spawnDaemon(ns, command, config, {
    nodeFlags: [
      ...values['node-flags'].split(' ').filter((flag) => flag !== ''),
      ...(values.turns ? [`--import=${TURNS_MAIN}`] : []),
    ],
    env: { ...extraEnv, ...(values.turns && { KPROXY_TURNS_OUT: turnsFile }) },
  });
  daemon = child;
  const syncLines: SyncLine[] = [];
  let stderr = '';
  let partial = '';
  const log = values.log === undefined ? undefined : createWriteStream(values.log);
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    log?.write(chunk);
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.includes('"msg":"rules synced"')) syncLines.push(JSON.parse(line));
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = once(child, 'exit');

  // First sync: the last-successful-sync timestamp appears (0 until then).
  const syncedAt = await firstSyncAt(ns, child, spawnedAt, TIMEOUT_MS, () => stderr);
  const timeToFirstSyncSeconds = (syncedAt - spawnedAt) / 1000;
  const syncedPid = daemonPid(child.pid!, command.entry);
  const firstSyncCpuSeconds = syncedPid === undefined ? undefined : cpuSeconds(syncedPid);
  // The log line of that sync may trail the metric by a moment.
  for (let waited = 0; syncLines.length === 0 && waited < 5000; waited += 100) await sleep(100);
  const first = syncLines[0] ?? {};

  // The cold start's aftermath (fragment indexes, memory given back) is within the idle time.
  await sleep(IDLE_SECONDS * 1000);
  // stop, not kill: the probe prints its answers (one line, ~100 per second probed) on SIGTERM, and
  // kill's 2-s grace cut that line short at load ~40. The bound is the run's own.
  await probe.stop(TIMEOUT_MS);
  const probed = probe.output();
  const healthz = healthzFigures(probed, syncedAt);
  if (values.probes !== undefined) {
    const answers = probed.trim().split('\n').pop();
    writeFileSync(values.probes, `{"spawnedAt":${spawnedAt},"syncedAt":${syncedAt},"probe":${answers}}\n`);
  }
  const pid = daemonPid(child.pid!, command.entry);
  if (pid === undefined) throw new Error(`no ${command.entry} process under PID ${child.pid}`);
  const memory = processMemoryMiB(pid);
  const page = await scrape(ns);

  child.kill('SIGTERM');
  const stopTimer = setTimeout(killDaemon, 30_000);
  const [exitCode, signal] = (await exited) as [number | null, NodeJS.Signals | null];
  clearTimeout(stopTimer);
  await api.kill();
  // From the first answered probe (before it the daemon was loading, and /healthz not listening).
  const firstAnswered = (JSON.parse(probed.trim().split('\n').pop()!) as { answers: [number, number][] })
    .answers[0]?.[0];
  const turns =
    values.turns && firstAnswered !== undefined ? turnFigures(turnsFile, firstAnswered, syncedAt) : {};

  const heapUsed = sample(page, 'nodejs_heap_size_used_bytes');
  reportSection({
    services,
    endpointsPerService: endpoints,
    nodes,
    runs: values.checkout
      ? 'checkout (TypeScript)'
      : values['as-command']
        ? 'installed (JavaScript), as its kproxy command runs it (the container image)'
        : "installed (JavaScript), the unit's command and environment",
    idleSeconds: IDLE_SECONDS,
    ...(values.env.length > 0 && { env: values.env.join(' ') }),
    daemonPid: pid,
    viaNsenterExec: pid === child.pid,
    ...memory,
    heapUsedMiB: heapUsed === undefined ? undefined : round(heapUsed / 2 ** 20),
    timeToFirstSyncSeconds: round(timeToFirstSyncSeconds, 2),
    firstSyncCpuSeconds,
    bareListSeconds: round(bareList.listMs / 1000, 2),
    ...healthz,
    ...turns,
    firstSyncKind: first.kind,
    firstSyncMs: first.durationMs,
    servicePortsSynced: first.servicePorts,
    endpointsSynced: first.endpoints,
    ruleObjects: sample(page, 'kproxy_sync_proxy_rules_objects') ?? first.objects,
    syncsDuringRun: syncLines.length,
    daemonExit: exitCode ?? signal,
  });
  if (first.servicePorts !== services) {
    console.error(`daemon-memory: the first sync had ${first.servicePorts} service ports, not ${services}`);
    process.exitCode = 1;
  }
} finally {
  killDaemon();
  await api?.kill();
  await lab.destroy();
  rmSync(dir, { recursive: true, force: true });
}
