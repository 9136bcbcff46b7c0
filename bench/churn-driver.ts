// The churn sections' writer and watcher, run inside the daemon's namespace (next to the stand-in
// API server and the kernel the daemon programs), so one clock times both ends of each write:
// - `nft monitor` prints each commit (nftables' elements, however written: nft or netlink; the
//   iptables-nft rules and chains of an iptables-nft-restore) with no polling of a 300k-element
//   map; churn-kernel.ts turns each commit into the keys of what it put in and took out;
// - open loop: write k is sent at its time in the plan (churn-schedule.ts: one endpoint replaced in
//   place, or rollout-schedule.ts: Deployments rolled at once), whether or not the earlier ones are
//   in yet (a PUT of the Service's EndpointSlice, its last-change-trigger-time annotation the
//   write's time, as the daemon's own kubeproxy_network_programming_duration_seconds measures from);
// - a write's latency: from just before its PUT to the end of the commit that shows its effect;
// - at the end, the ruleset read back (churn-kernel.ts's finalListing) and each Service's endpoints
//   in it held against those it should end with: nothing lost, nothing left over.
// nft monitor subscribes only once it has read the whole ruleset (~30 s at 10,000 services on a
// busy machine, restarted by any change meanwhile; events before are lost), so the driver starts
// before the daemon, on an empty ruleset: it prints "monitoring", and starts the churn on a "go"
// line on stdin, once the monitor has printed everything before it (a probe element of our own),
// after warming the harness up (warmUp: writes the daemon does not watch).
// Prints "churned" once the churn and its wait are over, then one JSON line: the latency
// summary, how late writes started and how fast the API answered, the final check. --timeline FILE
// also writes each write's times (churn-timeline.ts reads them beside the daemon's log), --commits
// FILE each commit's line and when it was read.
//   node bench/churn-driver.ts URL --mode nftables|iptables --schedule replace|rollout
//     --services N --endpoints E --nodes K --per-second R --seconds S [--rolling D] [--wait 10]
//     [--warm-up 3] [--timeline FILE] [--commits FILE]
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { setImmediate } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import {
  type EndpointSlice,
  HEADLESS_LABEL,
  LAST_CHANGE_TRIGGER_TIME_ANNOTATION,
  SERVICE_NAME_LABEL,
} from '../src/kube/objects.ts';
import { ENDPOINT_SLICES } from '../src/kube/resources.ts';
import { type ChurnMode, CommitReader, expectationKey, FinalRuleset, finalListing } from './churn-kernel.ts';
import { latencySummary, replacePlan } from './churn-schedule.ts';
import { percentile, round } from './measure.ts';
import { rolloutPlan } from './rollout-schedule.ts';
import { syntheticSlice } from './synthetic-cluster.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    mode: { type: 'string', default: 'nftables' },
    schedule: { type: 'string', default: 'replace' },
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    'per-second': { type: 'string', default: '10' },
    seconds: { type: 'string', default: '60' },
    rolling: { type: 'string', default: '1000' },
    wait: { type: 'string', default: '10' },
    'warm-up': { type: 'string', default: '3' },
    timeline: { type: 'string' },
    commits: { type: 'string' },
  },
});
const base = positionals[0];
if (base === undefined) throw new Error('usage: churn-driver.ts URL [options]');
const mode = values.mode as ChurnMode;
const options = {
  services: Number(values.services),
  endpoints: Number(values.endpoints),
  nodes: Number(values.nodes),
  perSecond: Number(values['per-second']),
  seconds: Number(values.seconds),
};
const plan =
  values.schedule === 'rollout'
    ? rolloutPlan({ ...options, rolling: Number(values.rolling) })
    : replacePlan(options);

/** Epoch milliseconds with a fraction: Date.now()'s clock, performance.now()'s resolution. */
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** A table of our own in the namespace whose element, once printed, shows the monitor listening. */
const PROBE = 'kproxy-bench-churn-probe';
/** How long the monitor may take to print a probe: the cold start's events come before it. */
const CATCH_UP_MS = 600_000;

const pending = new Map<string, number>();
const writtenAt: number[] = [];
/** When each write's PUT was answered (undefined: failed, or not yet). */
const answeredAt: (number | undefined)[] = [];
const latencies: (number | undefined)[] = Array.from({ length: plan.count }, () => undefined);
/** The last probe element the monitor printed (probe n is 127.0.n/256.n%256). */
let probeSeen = 0;
let probesSent = 0;
/** nft monitor's own "lost some netlink events" lines during the churn: a socket that overflowed. */
let lostEvents = 0;
/** Each commit's line (`# new generation N by process P (name)`) seen in the churn, and when. */
const generationsSeen: string[] = [];
/** Set once the cold start's events are printed: losses before are not the churn's. */
let churning = false;
const TIMELINE_HEADER = 'write\tputAt\tansweredAt\tseenAt';
const PROBE_LINE = new RegExp(`${PROBE} ready \\{ 127\\.0\\.(\\d+)\\.(\\d+) \\}`);

const monitor = spawn('nft', ['monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
const commits = new CommitReader(mode);
let partial = '';
monitor.stdout.setEncoding('utf8').on('data', (chunk: string) => {
  const at = now();
  const lines = (partial + chunk).split('\n');
  partial = lines.pop()!;
  for (const line of lines) {
    const probe = PROBE_LINE.exec(line);
    if (probe) probeSeen = Math.max(probeSeen, Number(probe[1]) * 256 + Number(probe[2]));
    if (churning && line.startsWith('#') && /lost/i.test(line)) lostEvents++;
    const keys = commits.line(line);
    if (keys !== undefined && churning) generationsSeen.push(`${at.toFixed(3)}\t${line}`);
    for (const key of keys ?? []) {
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

/** Feeds each line of the commands' output to `sink`, in order. */
async function readLines(
  commands: readonly (readonly string[])[],
  sink: (line: string) => void,
): Promise<void> {
  for (const [command, ...args] of commands) {
    const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    for await (const line of createInterface({ input: child.stdout })) sink(line);
    const code = await exited;
    if (code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${code}`);
  }
}

/**
 * Kept-alive connections to the API server, as many as a busy server answers at once: a new
 * connection per write (undici's default, unbounded) piles up past its listen backlog on a loaded
 * machine and gets reset. A write queued here waits in its latency, as a write to a slow API
 * server does.
 */
const api = new Agent({ connections: 64 });

/** A slice's object path, or its collection's for a create. */
function slicePath(slice: EndpointSlice, create = false): string {
  const collection = `/apis/discovery.k8s.io/v1/namespaces/${slice.metadata.namespace}/endpointslices`;
  return create ? collection : `${collection}/${slice.metadata.name}`;
}

/** Writes a slice whose last-change-trigger-time is `at`; resolves with the answer's status. */
async function send(method: 'POST' | 'PUT', slice: EndpointSlice, at: number): Promise<number> {
  const body = {
    apiVersion: ENDPOINT_SLICES.apiVersion,
    ...slice,
    metadata: {
      ...slice.metadata,
      annotations: { [LAST_CHANGE_TRIGGER_TIME_ANNOTATION]: new Date(at).toISOString() },
    },
  };
  const response = await request(`${base}${slicePath(slice, method === 'POST')}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher: api,
  });
  await response.body.dump();
  return response.statusCode;
}

/** Slices of the warm-up, written in turn. */
const WARM_UP_SLICES = 100;

/**
 * Slice `n` of the warm-up, its first endpoint moved by `round`: headless, so that neither the
 * daemon's watch (kube-proxy's selector) nor its model ever sees it.
 */
function warmUpSlice(n: number, round: number): EndpointSlice {
  const slice = syntheticSlice(n, options.endpoints, options.nodes, round % 2);
  return {
    ...slice,
    metadata: {
      ...slice.metadata,
      name: `kproxy-bench-warm-up-${n}`,
      labels: { [SERVICE_NAME_LABEL]: 'kproxy-bench-warm-up', [HEADLESS_LABEL]: '' },
    },
  };
}

/**
 * The harness's own start, before the churn: the driver's connections and the stand-in API
 * server's write path (a Node process too: its first writes run unoptimized code and took ~150 ms
 * each) warmed by `seconds` of writes at the churn's rate that the daemon does not watch, so the
 * churn's first seconds time kproxy rather than the harness. The daemon's own code is not warmed.
 */
async function warmUp(seconds: number): Promise<void> {
  // Created first: a PUT of a slice not yet there is refused (404), as by kube-apiserver.
  const created = await Promise.all(
    Array.from({ length: WARM_UP_SLICES }, (_, n) => send('POST', warmUpSlice(n, 0), now())),
  );
  const writes: Promise<number>[] = [];
  const start = now();
  for (let k = 0; k < seconds * options.perSecond; k++) {
    const ahead = start + (k * 1000) / options.perSecond - now();
    if (ahead > 0) await sleep(ahead);
    else if (k % 50 === 0) await setImmediate();
    const n = k % WARM_UP_SLICES;
    writes.push(send('PUT', warmUpSlice(n, Math.floor(k / WARM_UP_SLICES) + 1), now()));
  }
  const refused = [
    ...created.filter((status) => status !== 201),
    ...(await Promise.all(writes)).filter((status) => status !== 200),
  ];
  if (refused.length > 0)
    throw new Error(
      `the warm-up: ${refused.length} writes refused (HTTP ${[...new Set(refused)].join(', ')})`,
    );
}

/**
 * Every write, each at its time, open loop; resolves once every PUT is answered. A PUT that fails
 * is counted and its write left unseen (missed), not retried: the plan's next write of the
 * Service carries its state anyway, and the final check says whether anything stayed wrong.
 */
async function churn(): Promise<{ ackMs: number[]; lateMs: number[]; failed: string[] }> {
  const failed: string[] = [];
  const ackMs: number[] = [];
  const lateMs: number[] = [];
  const writes: Promise<void>[] = [];
  const start = now();
  for (let k = 0; k < plan.count; k++) {
    const { atMs, slice, expect } = plan.write(k);
    // Behind schedule (a busy machine), the due writes go without a timer's turn each (a turn took
    // 10+ ms at load ~25, so 1,000/s fell behind by tens of seconds), yielding now and then so the
    // monitor's lines are still read as they come.
    const ahead = start + atMs - now();
    if (ahead > 0) await sleep(ahead);
    else if (k % 50 === 0) await setImmediate();
    const key = expectationKey(mode, expect);
    pending.set(key, k);
    const at = now();
    writtenAt[k] = at;
    lateMs.push(at - start - atMs);
    const path = slicePath(slice);
    writes.push(
      send('PUT', slice, at).then(
        (status) => {
          if (status !== 200) throw new Error(`PUT ${path}: HTTP ${status}`);
          const answered = now();
          answeredAt[k] = answered;
          ackMs.push(answered - at);
        },
        (error: Error) => {
          pending.delete(key);
          failed.push(`${path}: ${error.message}`);
        },
      ),
    );
  }
  await Promise.all(writes);
  return { ackMs, lateMs, failed };
}

/**
 * Each seen write's latency from its PUT's answer on rather than from its PUT: what the API
 * server's own time (GC pauses of a stand-in in Node among it) leaves. A lower bound of the path
 * after the server (its watch event goes out before its answer, so the commit may come first).
 */
function afterAnswer(): { afterApiAnswerP50Ms: number; afterApiAnswerP99Ms: number } {
  const after: number[] = [];
  for (const [k, latency] of latencies.entries()) {
    const answered = answeredAt[k];
    if (latency !== undefined && answered !== undefined) after.push(writtenAt[k]! + latency - answered);
  }
  return {
    afterApiAnswerP50Ms: round(percentile(after, 50), 2),
    afterApiAnswerP99Ms: round(percentile(after, 99), 2),
  };
}

/**
 * One line a write: its index, when its PUT went, when it was answered and when the kernel showed
 * it (epoch ms; empty: never).
 */
function writeTimeline(file: string): void {
  const at = (ms: number | undefined) => (ms === undefined ? '' : ms.toFixed(3));
  const lines = writtenAt.map((written, k) => {
    const latency = latencies[k];
    return `${k}\t${at(written)}\t${at(answeredAt[k])}\t${at(latency === undefined ? undefined : written + latency)}\n`;
  });
  writeFileSync(file, `${TIMELINE_HEADER}\n${lines.join('')}`);
}

try {
  await nft(`add table ip ${PROBE}\nadd set ip ${PROBE} ready { type ipv4_addr ; }\n`);
  await caughtUp();
  process.stdout.write('monitoring\n');
  await goLine();
  await warmUp(Number(values['warm-up']));
  await caughtUp();
  await nft(`delete table ip ${PROBE}\n`);
  churning = true;

  const startedAt = Date.now();
  const { ackMs, lateMs, failed } = await churn();
  const endedAt = Date.now();
  const waitUntil = now() + Number(values.wait) * 1000;
  while (pending.size > 0 && now() < waitUntil) await sleep(50);
  process.stdout.write('churned\n');

  const summary = latencySummary(latencies);
  if (summary === undefined) throw new Error('no change was seen in the kernel');
  if (values.timeline !== undefined) writeTimeline(values.timeline);
  if (values.commits !== undefined)
    writeFileSync(values.commits, `seenAt\tline\n${generationsSeen.join('\n')}\n`);
  const listedAt = now();
  const ruleset = new FinalRuleset(mode);
  await readLines(finalListing(mode), (line) => ruleset.line(line));
  const wrong = ruleset.mismatches(options.services, (i) => plan.finalAddresses(i));
  process.stdout.write(
    `${JSON.stringify({
      ...summary,
      startedAt,
      endedAt,
      apiAckP50Ms: round(percentile(ackMs, 50), 2),
      apiAckP99Ms: round(percentile(ackMs, 99), 2),
      ...afterAnswer(),
      writeLateP99Ms: round(percentile(lateMs, 99), 2),
      // The rate the writes went at: longer than the plan's seconds when the machine held them up.
      writeSeconds: round((writtenAt.at(-1)! - writtenAt[0]!) / 1000, 1),
      lostEvents,
      writesFailed: failed.length,
      writeFailures: failed.slice(0, 3),
      finalMismatches: wrong.length,
      finalMismatchedServices: wrong.slice(0, 5),
      finalCheckSeconds: round((now() - listedAt) / 1000, 1),
    })}\n`,
  );
} finally {
  monitor.kill();
  await api.close();
}
