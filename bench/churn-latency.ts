// Churn section: network programming latency under a steady stream of endpoint changes, end to end
// through the real daemon. The cluster (N services × E endpoints) is served by the stand-in API
// server and `kproxy run` (nftables mode) programs it, both in a throwaway namespace, as in the
// daemon section (daemon-process.ts). churn-driver.ts, in the same namespace, starts first (its
// `nft monitor` subscribes at once on an empty ruleset); once the first sync is in, it writes R
// endpoint changes per second to random Services for S seconds and times each from its API write
// to its map element's commit in the kernel (`nft monitor`): p50, p99, max.
// Beside it, the daemon's own kubeproxy_network_programming_duration_seconds (mean: its buckets
// start at 0.25 s), measured from the slices' last-change-trigger-time as upstream defines it.
// minSyncPeriod is kube-proxy's coalescing delay (1 s by default): the section sets it (default
// 1ms, no coalescing beyond one tick) so the figure is kproxy's own path, not a configured wait.
//   node bench/churn-latency.ts [--services 10000] [--endpoints 10] [--nodes 100]
//     [--per-second 10] [--seconds 60] [--min-sync-period 1ms] [--timeout 300] [--checkout]
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  NODE_BIN,
  sample,
  scrape,
  spawnDaemon,
  startApiServer,
} from './daemon-process.ts';
import { reportSection, round } from './measure.ts';
import { writeClusterList } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    'per-second': { type: 'string', default: '10' },
    seconds: { type: 'string', default: '60' },
    'min-sync-period': { type: 'string', default: '1ms' },
    timeout: { type: 'string', default: '300' },
    checkout: { type: 'boolean', default: false },
  },
});
const TIMEOUT_MS = Number(values.timeout) * 1000;
/** After the first sync: the cold start's aftermath (fragment indexes, collections) is over. */
const SETTLE_MS = 5_000;
const DRIVER_MAIN = join(import.meta.dirname, 'churn-driver.ts');
const IPV4 = '{ip_family="IPv4"}';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The daemon's network programming and sync counters, to take the churn's share of them. */
async function daemonCounters(ns: string): Promise<{ sum: number; count: number; syncs: number }> {
  const page = await scrape(ns);
  const value = (name: string) => sample(page, `${name}${IPV4}`) ?? 0;
  return {
    sum: value('kubeproxy_network_programming_duration_seconds_sum'),
    count: value('kubeproxy_network_programming_duration_seconds_count'),
    syncs: value('kubeproxy_sync_proxy_rules_duration_seconds_count'),
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
  writeFileSync(config, `${CONFIG}minSyncPeriod: ${values['min-sync-period']}\n`);

  const ns = await lab.addNetns('node');
  api = await startApiServer(lab, ns, data, TIMEOUT_MS);
  // The driver's nft monitor subscribes at once on the empty ruleset (churn-driver.ts).
  const driver = lab.spawn(
    ns,
    NODE_BIN,
    [
      DRIVER_MAIN,
      API,
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
    ],
    { stdin: true },
  );
  await driver.waitFor('monitoring', TIMEOUT_MS);
  const command = values.checkout ? fromCheckout() : await installed(join(dir, 'root'));
  const spawnedAt = Date.now();
  daemon = spawnDaemon(ns, command, config);
  let stderr = '';
  daemon.stdout!.resume();
  daemon.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const syncedAt = await firstSyncAt(ns, daemon, spawnedAt, TIMEOUT_MS, () => stderr);
  await sleep(SETTLE_MS);

  const before = await daemonCounters(ns);
  driver.send('go\n');
  // The monitor first prints the cold start's elements; then the churn and the wait for stragglers.
  const result = await driver.waitFor('"changes"', TIMEOUT_MS + (Number(values.seconds) + 10) * 1000);
  const churn = JSON.parse(result) as Record<string, number>;
  const after = await daemonCounters(ns);
  const observed = after.count - before.count;

  reportSection({
    ...cluster,
    perSecond: Number(values['per-second']),
    seconds: Number(values.seconds),
    minSyncPeriod: values['min-sync-period'],
    runs: values.checkout ? 'checkout (TypeScript)' : 'installed (JavaScript)',
    timeToFirstSyncSeconds: round((syncedAt - spawnedAt) / 1000, 2),
    churnChanges: churn.changes,
    churnMissed: churn.missed,
    churnP50Ms: churn.p50Ms,
    churnP99Ms: churn.p99Ms,
    churnMaxMs: churn.maxMs,
    apiAckP50Ms: churn.apiAckP50Ms,
    writeLateP99Ms: churn.writeLateP99Ms,
    syncsDuringChurn: after.syncs - before.syncs,
    daemonProgrammingObserved: observed,
    daemonProgrammingMeanMs:
      observed > 0 ? round(((after.sum - before.sum) / observed) * 1000, 2) : undefined,
  });
  if (churn.missed! > 0) {
    console.error(`churn: ${churn.missed} of ${churn.changes} changes never reached the kernel`);
    process.exitCode = 1;
  }
} finally {
  killDaemon();
  await api?.kill();
  await lab.destroy();
  rmSync(dir, { recursive: true, force: true });
}
