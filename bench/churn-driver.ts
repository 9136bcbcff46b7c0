// The churn section's writer and watcher, run inside the daemon's namespace (next to the stand-in
// API server and the kernel the daemon programs), so one clock times both ends of each change:
// - `nft monitor new elements` prints each element as the kernel commits it, however it was
//   written (nft, netlink), with no polling of a 100k-element map;
// - open loop: change k is written at k / rate s, whether or not the earlier ones are in yet
//   (a PUT of the Service's EndpointSlice, its last-change-trigger-time annotation the write's
//   time, as the daemon's own kubeproxy_network_programming_duration_seconds measures from);
// - a change's latency: from just before its PUT to its new endpoint element's monitor line.
// Prints one JSON line: the latency summary (churn-schedule.ts) and how late writes started.
//   node bench/churn-driver.ts URL --services N --endpoints E --nodes K --per-second R --seconds S
//     [--wait 10]
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION } from '../src/kube/objects.ts';
import { ENDPOINT_SLICES } from '../src/kube/resources.ts';
import { addedElementKeys, changeKey, churnSchedule, churnSlice, latencySummary } from './churn-schedule.ts';
import { percentile, round } from './measure.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    'per-second': { type: 'string', default: '10' },
    seconds: { type: 'string', default: '60' },
    wait: { type: 'string', default: '10' },
  },
});
const base = positionals[0];
if (base === undefined) throw new Error('usage: churn-driver.ts URL [options]');
const endpoints = Number(values.endpoints);
const nodes = Number(values.nodes);

/** Epoch milliseconds with a fraction: Date.now()'s clock, performance.now()'s resolution. */
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** A table of our own in the namespace whose element, once printed, shows the monitor listening. */
const PROBE = 'kproxy-bench-churn-probe';
const MONITOR_START_MS = 180_000;

const schedule = churnSchedule({
  services: Number(values.services),
  perSecond: Number(values['per-second']),
  seconds: Number(values.seconds),
});
const pending = new Map<string, number>();
const writtenAt: number[] = [];
const latencies: (number | undefined)[] = schedule.map(() => undefined);
let listening = false;

const monitor = spawn('nft', ['monitor', 'new', 'elements'], { stdio: ['ignore', 'pipe', 'inherit'] });
let partial = '';
monitor.stdout.setEncoding('utf8').on('data', (chunk: string) => {
  const at = now();
  const lines = (partial + chunk).split('\n');
  partial = lines.pop()!;
  for (const line of lines) {
    if (line.includes(PROBE)) listening = true;
    for (const key of addedElementKeys(line)) {
      const k = pending.get(key);
      if (k === undefined) continue;
      pending.delete(key);
      latencies[k] = at - writtenAt[k]!;
    }
  }
});

async function nft(script: string): Promise<void> {
  const child = spawn('nft', ['-f', '-'], { stdio: ['pipe', 'ignore', 'inherit'] });
  child.stdin.end(script);
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`nft -f - exited ${code}`);
}

try {
  // nft monitor subscribes only once it has read the whole ruleset into its cache (~30 s and
  // ~200 MB at 10,000 services on a busy machine; events before that are lost): probe elements
  // until one is printed.
  await nft(`add table ip ${PROBE}\nadd set ip ${PROBE} ready { type ipv4_addr ; }\n`);
  const probeUntil = now() + MONITOR_START_MS;
  for (let probe = 1; !listening; probe++) {
    if (now() > probeUntil) throw new Error(`nft monitor printed no probe element in ${MONITOR_START_MS} ms`);
    await nft(`add element ip ${PROBE} ready { 127.0.${probe >> 8}.${probe & 255} }\n`);
    await sleep(500);
  }
  await nft(`delete table ip ${PROBE}\n`);

  const ackMs: number[] = [];
  const lateMs: number[] = [];
  const writes: Promise<void>[] = [];
  const start = now();
  for (const [k, change] of schedule.entries()) {
    await sleep(start + change.atMs - now());
    const slice = churnSlice(change, endpoints, nodes);
    pending.set(changeKey(change, endpoints), k);
    const at = now();
    writtenAt[k] = at;
    lateMs.push(at - start - change.atMs);
    const body = {
      apiVersion: ENDPOINT_SLICES.apiVersion,
      ...slice,
      metadata: {
        ...slice.metadata,
        annotations: { [LAST_CHANGE_TRIGGER_TIME_ANNOTATION]: new Date(at).toISOString() },
      },
    };
    const path = `/apis/discovery.k8s.io/v1/namespaces/${slice.metadata.namespace}/endpointslices/${slice.metadata.name}`;
    writes.push(
      request(`${base}${path}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (response) => {
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`PUT ${path}: HTTP ${response.statusCode}`);
        ackMs.push(now() - at);
      }),
    );
  }
  await Promise.all(writes);
  const waitUntil = now() + Number(values.wait) * 1000;
  while (pending.size > 0 && now() < waitUntil) await sleep(50);

  const summary = latencySummary(latencies);
  if (summary === undefined) throw new Error('no change was seen in the kernel');
  process.stdout.write(
    `${JSON.stringify({
      ...summary,
      apiAckP50Ms: round(percentile(ackMs, 50), 2),
      writeLateP99Ms: round(percentile(lateMs, 99), 2),
    })}\n`,
  );
} finally {
  monitor.kill();
}
