// Churn sections: network programming latency under a stream of endpoint changes, end to end
// through the real daemon, in nftables or iptables mode (iptables-nft). The cluster (N services ×
// E endpoints) is served by the stand-in API server and `kproxy run` programs it, both in a
// throwaway namespace, as in the daemon section (daemon-process.ts). churn-driver.ts, in the same
// namespace, starts first (its `nft monitor` subscribes at once on an empty ruleset); once the
// first sync is in and the harness is warm (--warm-up seconds of writes at the churn's rate that
// the daemon does not watch: churn-driver.ts's warmUp), it writes the plan's EndpointSlice
// changes (--schedule replace: one endpoint replaced in place, R a second over random Services;
// rollout: D Deployments rolled at once, rollout-schedule.ts) for S seconds, times each from its
// API write to the commit that shows it in the kernel (p50, p99, max), and at the end reads the
// ruleset back and holds every Service's endpoints in it against the API's. Beside it, /healthz
// probed every 10 ms (healthz-probe.ts, open loop) over the churn, the daemon's resident memory
// before, through (its most) and after it, and the daemon's own syncs: how many, their mean
// duration, and its kubeproxy_network_programming_duration_seconds (mean: its buckets start at
// 0.25 s), measured from the slices' last-change-trigger-time as upstream defines it.
// minSyncPeriod is kube-proxy's coalescing delay (1 s by default): the section sets it (default
// 1ms, no coalescing beyond one tick) so the figure is kproxy's own path, not a configured wait.
//   node bench/churn-latency.ts [--mode nftables|iptables] [--schedule replace|rollout]
//     [--services 10000] [--endpoints 10] [--nodes 100] [--per-second 10] [--seconds 60]
//     [--rolling 1000] [--min-sync-period 1ms] [--wait 10] [--warm-up 3] [--timeout 300] [--checkout]
//     [--node-flags="--cpu-prof --cpu-prof-dir=DIR"]   (diagnostic V8 flags added to the daemon's)
//     [--api-node-flags="--trace-gc"]   (the same for the stand-in API server)
//     [--save-output DIR]   (the daemon's stdout, its log and V8's traces, and the API server's, kept,
//                            with each write's times and each commit's: churn-timeline.ts DIR reads them)
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Lab, type LabProcess } from '../harness/netns.ts';
import {
  API,
  CONFIG,
  firstSyncAt,
  fromCheckout,
  installed,
  NODE_BIN,
  processMemoryMiB,
  sample,
  scrape,
  spawnDaemon,
  startApiServer,
} from './daemon-process.ts';
import { percentile, reportSection, round } from './measure.ts';
import { writeClusterList } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'nftables' },
    schedule: { type: 'string', default: 'replace' },
    rolling: { type: 'string', default: '1000' },
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    'per-second': { type: 'string', default: '10' },
    seconds: { type: 'string', default: '60' },
    'min-sync-period': { type: 'string', default: '1ms' },
    wait: { type: 'string', default: '10' },
    'warm-up': { type: 'string', default: '3' },
    timeout: { type: 'string', default: '300' },
    checkout: { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    'api-node-flags': { type: 'string', default: '' },
    'save-output': { type: 'string' },
  },
});
const TIMEOUT_MS = Number(values.timeout) * 1000;
/** After the first sync: the cold start's aftermath (fragment indexes, collections) is over. */
const SETTLE_MS = 5_000;
const DRIVER_MAIN = join(import.meta.dirname, 'churn-driver.ts');
const IPV4 = '{ip_family="IPv4"}';
const HEALTHZ = 'http://127.0.0.1:10256/healthz';
const PROBE_MAIN = join(import.meta.dirname, 'healthz-probe.ts');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const flagList = (flags: string) => flags.split(' ').filter((flag) => flag !== '');
const saveOutput = values['save-output'];
if (saveOutput !== undefined) mkdirSync(saveOutput, { recursive: true });

/** The daemon's network programming and sync counters, to take the churn's share of them. */
async function daemonCounters(
  ns: string,
): Promise<Record<'sum' | 'count' | 'syncs' | 'syncSeconds', number>> {
  const page = await scrape(ns);
  const value = (name: string) => sample(page, `${name}${IPV4}`) ?? 0;
  return {
    sum: value('kubeproxy_network_programming_duration_seconds_sum'),
    count: value('kubeproxy_network_programming_duration_seconds_count'),
    syncs: value('kubeproxy_sync_proxy_rules_duration_seconds_count'),
    syncSeconds: value('kubeproxy_sync_proxy_rules_duration_seconds_sum'),
  };
}

/**
 * The counters once the daemon's sync count holds for SETTLE_MS: the sync that committed the last
 * write records its duration after the commit the driver saw, and the mean must count it (an
 * iptables sync at 30k lasts a minute or more).
 */
async function settledCounters(ns: string): Promise<Awaited<ReturnType<typeof daemonCounters>>> {
  let last = await daemonCounters(ns);
  for (const deadline = Date.now() + TIMEOUT_MS; Date.now() < deadline; ) {
    await sleep(SETTLE_MS);
    const now = await daemonCounters(ns);
    if (now.syncs === last.syncs) return now;
    last = now;
  }
  return last;
}

/**
 * CPU seconds of the daemon's process: its threads (the /healthz worker included) and the tools it
 * ran and reaped (nft, iptables-restore): stat(5)'s utime, stime, cutime, cstime, 100 ticks a second.
 */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / 100;
}

/**
 * Reads the daemon's VmRSS every 100 ms until the function returned is called; that returns the
 * most seen, in MiB. A daemon that exited ends the sampling (the run fails on that itself), rather
 * than a throw from the timer that would skip the namespaces' cleanup.
 */
function rssPeakSampler(pid: number): () => number {
  let peak = processMemoryMiB(pid).rssMiB!;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, processMemoryMiB(pid).rssMiB!);
    } catch {
      clearInterval(timer);
    }
  }, 100);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

/** p50/p99/max of the /healthz answers (healthz-probe.ts's line) due between `from` and `to`. */
function healthzFigures(output: string, from: number, to: number): Record<string, number> {
  const { answers } = JSON.parse(output.trim().split('\n').pop()!) as { answers: [number, number][] };
  const during = answers.filter(([due]) => due >= from && due <= to).map(([, latency]) => latency);
  if (during.length === 0) throw new Error('the /healthz probe got no answer during the churn');
  return {
    healthzProbes: during.length,
    healthzP50Ms: percentile(during, 50),
    healthzP99Ms: percentile(during, 99),
    healthzMaxMs: during.reduce((a, b) => Math.max(a, b), 0),
  };
}

const lab = new Lab(`bench-churn-${process.pid}`);
const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-churn-'));
let daemon: ChildProcess | undefined;
let api: LabProcess | undefined;
// Not a Lab process (spawned through nsenter): killed however this one ends.
const killDaemon = () => {
  if (daemon && daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGKILL');
};
process.on('exit', killDaemon);
try {
  const data = join(dir, 'cluster.json');
  const cluster = {
    services: Number(values.services),
    endpointsPerService: Number(values.endpoints),
    nodes: Number(values.nodes),
  };
  await writeClusterList(data, cluster);
  const config = join(dir, 'config.yaml');
  const mode = values.mode === 'iptables' ? 'iptables' : 'nftables';
  writeFileSync(
    config,
    `${CONFIG.replace('mode: nftables', `mode: ${mode}`)}minSyncPeriod: ${values['min-sync-period']}\n`,
  );

  const ns = await lab.addNetns('node');
  api = await startApiServer(lab, ns, data, TIMEOUT_MS, flagList(values['api-node-flags']));
  // The driver's nft monitor subscribes at once on the empty ruleset (churn-driver.ts).
  const driver = lab.spawn(
    ns,
    NODE_BIN,
    [
      DRIVER_MAIN,
      API,
      '--mode',
      mode,
      '--schedule',
      values.schedule,
      '--rolling',
      values.rolling,
      '--services',
      values.services,
      '--endpoints',
      values.endpoints,
      '--nodes',
      values.nodes,
      '--per-second',
      values['per-second'],
      '--seconds',
      values.seconds,
      '--wait',
      values.wait,
      '--warm-up',
      values['warm-up'],
      ...(saveOutput === undefined
        ? []
        : ['--timeline', resolve(saveOutput, 'writes.tsv'), '--commits', resolve(saveOutput, 'commits.tsv')]),
    ],
    { stdin: true },
  );
  await driver.waitFor('monitoring', TIMEOUT_MS);
  const command = values.checkout ? fromCheckout() : await installed(join(dir, 'root'));
  const spawnedAt = Date.now();
  daemon = spawnDaemon(ns, command, config, {
    nodeFlags: flagList(values['node-flags']),
  });
  let stderr = '';
  if (saveOutput === undefined) daemon.stdout!.resume();
  else daemon.stdout!.pipe(createWriteStream(join(saveOutput, 'daemon.out')));
  daemon.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const syncedAt = await firstSyncAt(ns, daemon, spawnedAt, TIMEOUT_MS, () => stderr);
  await sleep(SETTLE_MS);

  const probe = lab.spawn(ns, NODE_BIN, [PROBE_MAIN, HEALTHZ, '--every', '10']);
  await probe.waitFor('probing', TIMEOUT_MS);
  const before = await daemonCounters(ns);
  const cpuBefore = cpuSeconds(daemon.pid!);
  const rssBefore = processMemoryMiB(daemon.pid!).rssMiB!;
  const rssPeak = rssPeakSampler(daemon.pid!);
  driver.send('go\n');
  // The monitor first prints the cold start's elements; then the churn and the wait for stragglers,
  // after which the driver reads the ruleset back (at most the run's bound too).
  const seconds = Number(values['warm-up']) + Number(values.seconds) + Number(values.wait);
  await driver.waitFor('churned', TIMEOUT_MS + seconds * 1000);
  const after = await settledCounters(ns);
  const cpu = cpuSeconds(daemon.pid!) - cpuBefore;
  const rssChurnPeak = rssPeak();
  const rssAfter = processMemoryMiB(daemon.pid!).rssMiB!;
  const result = await driver.waitFor('"changes"', TIMEOUT_MS);
  const churn = JSON.parse(result) as Record<string, number> & {
    finalMismatchedServices: number[];
    writeFailures: string[];
  };
  const observed = after.count - before.count;
  // stop, not kill: the probe prints its answers on SIGTERM (daemon-memory.ts says why).
  await probe.stop(TIMEOUT_MS);
  const healthz = healthzFigures(probe.output(), churn.startedAt!, churn.endedAt!);
  const syncs = after.syncs - before.syncs;

  reportSection({
    ...cluster,
    mode,
    schedule: values.schedule,
    ...(values.schedule === 'rollout' ? { rolling: Number(values.rolling) } : {}),
    perSecond: Number(values['per-second']),
    seconds: Number(values.seconds),
    minSyncPeriod: values['min-sync-period'],
    runs: values.checkout ? 'checkout (TypeScript)' : 'installed (JavaScript)',
    timeToFirstSyncSeconds: round((syncedAt - spawnedAt) / 1000, 2),
    churnChanges: churn.changes,
    churnMissed: churn.missed,
    // Writes the API server refused or dropped: unseen, not the daemon's doing.
    writesFailed: churn.writesFailed,
    churnP50Ms: churn.p50Ms,
    churnP99Ms: churn.p99Ms,
    churnMaxMs: churn.maxMs,
    apiAckP50Ms: churn.apiAckP50Ms,
    apiAckP99Ms: churn.apiAckP99Ms,
    afterApiAnswerP50Ms: churn.afterApiAnswerP50Ms,
    afterApiAnswerP99Ms: churn.afterApiAnswerP99Ms,
    writeLateP99Ms: churn.writeLateP99Ms,
    writeSeconds: churn.writeSeconds,
    monitorLostEvents: churn.lostEvents,
    finalMismatches: churn.finalMismatches,
    finalMismatchedServices: churn.finalMismatchedServices,
    writeFailures: churn.writeFailures,
    finalCheckSeconds: churn.finalCheckSeconds,
    ...healthz,
    // A figure the machine's other load stretches less than wall time: what the churn costs the
    // daemon per write (at 1,000 writes a second, ms per write is the share of a core it needs).
    daemonCpuSeconds: round(cpu, 2),
    daemonCpuMsPerWrite: round((cpu * 1000) / churn.changes!, 3),
    // What the churn makes the daemon hold beyond its settled figure (VmRSS every 100 ms).
    daemonRssBeforeChurnMiB: rssBefore,
    daemonRssChurnPeakMiB: rssChurnPeak,
    daemonRssAfterChurnMiB: rssAfter,
    loadAverage: loadavg().map((l) => round(l, 1)),
    syncsDuringChurn: syncs,
    syncMeanMs: syncs > 0 ? round(((after.syncSeconds - before.syncSeconds) / syncs) * 1000, 1) : undefined,
    daemonProgrammingObserved: observed,
    daemonProgrammingMeanMs:
      observed > 0 ? round(((after.sum - before.sum) / observed) * 1000, 2) : undefined,
  });
  if (churn.missed! > 0 || churn.finalMismatches! > 0) {
    console.error(
      `churn: ${churn.missed} of ${churn.changes} changes never seen in the kernel, ` +
        `${churn.finalMismatches} Services end with other endpoints than the API's`,
    );
    process.exitCode = 1;
  }
} finally {
  // SIGTERM first: a daemon run with --node-flags (--cpu-prof) writes its profile as it exits.
  if (daemon && daemon.exitCode === null && daemon.signalCode === null) {
    const exited = new Promise((resolve) => daemon!.once('exit', resolve));
    daemon.kill('SIGTERM');
    const stopTimer = setTimeout(killDaemon, 30_000);
    await exited;
    clearTimeout(stopTimer);
  }
  await api?.kill();
  if (saveOutput !== undefined && api !== undefined) writeFileSync(join(saveOutput, 'api.out'), api.output());
  await lab.destroy();
  rmSync(dir, { recursive: true, force: true });
}
