// The churn section's writer and watcher, run inside the daemon's namespace (next to the stand-in
// API server and the kernel the daemon programs), so one clock times both ends of each change:
// - `nft monitor new elements` prints each element as the kernel commits it, however it was
//   written (nft, netlink), with no polling of a 100k-element map;
// - open loop: change k is written at k / rate s, whether or not the earlier ones are in yet
//   (a PUT of the Service's EndpointSlice, its last-change-trigger-time annotation the write's
//   time, as the daemon's own kubeproxy_network_programming_duration_seconds measures from);
// - a change's latency: from just before its PUT to its new endpoint element's monitor line.
// nft monitor subscribes only once it has read the whole ruleset (~30 s at 10,000 services on a
// busy machine, restarted by any change meanwhile; events before are lost), so the driver starts
// before the daemon, on an empty ruleset: it prints "monitoring", and starts the churn on a "go"
// line on stdin, once the monitor has printed everything before it (a probe element of our own).
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
/** How long the monitor may take to print a probe: the cold start's events come before it. */
const CATCH_UP_MS = 300_000;

const schedule = churnSchedule({
  services: Number(values.services),
  perSecond: Number(values['per-second']),
  seconds: Number(values.seconds),
});
const pending = new Map<string, number>();
const writtenAt: number[] = [];
const latencies: (number | undefined)[] = schedule.map(() => undefined);
/** The last probe element the monitor printed (probe n is 127.0.n/256.n%256). */
let probeSeen = 0;
let probesSent = 0;
const PROBE_LINE = new RegExp(`${PROBE} ready \\{ 127\\.0\\.(\\d+)\\.(\\d+) \\}`);

const monitor = spawn('nft', ['monitor', 'new', 'elements'], { stdio: ['ignore', 'pipe', 'inherit'] });
let partial = '';
monitor.stdout.setEncoding('utf8').on('data', (chunk: string) => {
  const at = now();
  const lines = (partial + chunk).split('\n');
  partial = lines.pop()!;
  for (const line of lines) {
    const probe = PROBE_LINE.exec(line);
    if (probe) probeSeen = Math.max(probeSeen, Number(probe[1]) * 256 + Number(probe[2]));
    for (const key of addedElementKeys(line)) {
      const k = pending.get(key);
      if (k === undefined) continue;
      pending.delete(key);
      latencies[k] = at - writtenAt[k]!;
    }
  }
});

/** Adds probe elements until the monitor prints one: it has printed every event before it. */
async function caughtUp(): Promise<void> {
  const first = probesSent + 1;
  const until = now() + CATCH_UP_MS;
  while (probeSeen < first) {
    if (monitor.exitCode !== null) throw new Error(`nft monitor exited (${monitor.exitCode})`);
    if (now() > until) throw new Error(`nft monitor printed no probe element in ${CATCH_UP_MS} ms`);
    probesSent++;
    await nft(`add element ip ${PROBE} ready { 127.0.${probesSent >> 8}.${probesSent & 255} }\n`);
    await sleep(500);
  }
}

function goLine(): Promise<void> {
  return new Promise((resolve) => {
    let input = '';
    process.stdin.setEncoding('utf8').on('data', (chunk: string) => {
      input += chunk;
      if (input.includes('go\n')) {
        process.stdin.destroy();
        resolve();
      }
    });
  });
}

async function nft(script: string): Promise<void> {
  const child = spawn('nft', ['-f', '-'], { stdio: ['pipe', 'ignore', 'inherit'] });
  child.stdin.end(script);
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`nft -f - exited ${code}`);
}

try {
  await nft(`add table ip ${PROBE}\nadd set ip ${PROBE} ready { type ipv4_addr ; }\n`);
  await caughtUp();
  process.stdout.write('monitoring\n');
  await goLine();
  await caughtUp();
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
