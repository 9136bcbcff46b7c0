// Where a churn's slow writes spent their time: each write's times (churn-driver.ts --timeline)
// beside the daemon's syncs (its "rules synced" log lines: when each ended, how long it took), on
// one clock (the same machine's epoch). A write's latency, from its PUT to the commit the driver
// saw, is cut at four points: the PUT's answer, the start and the end of the sync that ended last
// before the driver saw the commit, and the sight itself:
// - ack: the stand-in API server's answer (its watch event goes out before it);
// - beforeSync: from the answer to that sync's start; of it, `busy` is the time other syncs ran
//   (the write waited for the daemon), the rest the daemon had no sync running (the event was not
//   in yet: the watch stream, the daemon's event loop, its collector);
// - sync: that sync, from the answer on;
// - afterCommit: from its end to the driver's sight of the commit (`nft monitor` and its pipe).
//   A lower bound: when the monitor lags, the sync that committed the write ended earlier still.
// The monitor's own lag, when the run's commits (churn-driver.ts --commits) are as many as the
// daemon's syncs in the churn (each incremental sync that changes something is one commit): when
// the driver read each commit against when the daemon logged the sync's end.
//   node bench/churn-timeline.ts DIR   (a `churn-latency.ts --save-output DIR` run's files)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { percentile, round } from './measure.ts';

export interface WriteTimes {
  readonly putAt: number;
  readonly answeredAt: number | undefined;
  readonly seenAt: number | undefined;
}

/** One sync of the daemon, epoch ms. */
export interface Sync {
  readonly start: number;
  readonly end: number;
}

export const PARTS = ['ack', 'beforeSync', 'sync', 'afterCommit'] as const;
export type Part = (typeof PARTS)[number];

export type Breakdown = Record<Part, number> & { readonly latency: number; readonly busy: number };

/** The driver's timeline file: a header, then write, putAt, answeredAt, seenAt (empty: never). */
export function parseTimeline(text: string): WriteTimes[] {
  const [header, ...lines] = text.trimEnd().split('\n');
  if (header !== 'write\tputAt\tansweredAt\tseenAt') throw new Error(`not a churn timeline: ${header}`);
  const time = (field: string | undefined) =>
    field === undefined || field === '' ? undefined : Number(field);
  return lines.map((line) => {
    const [, putAt, answeredAt, seenAt] = line.split('\t');
    return { putAt: Number(putAt), answeredAt: time(answeredAt), seenAt: time(seenAt) };
  });
}

/** The daemon's syncs from its log (JSON lines among V8's traces), in the order they ended. */
export function parseSyncs(log: string): Sync[] {
  const syncs: Sync[] = [];
  for (const line of log.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"rules synced"')) continue;
    const { ts, durationMs } = JSON.parse(line) as { ts: number; durationMs: number };
    syncs.push({ start: ts - durationMs, end: ts });
  }
  return syncs.sort((a, b) => a.end - b.end);
}

/** When the driver read each commit line (churn-driver.ts --commits), in order. */
export function parseCommits(text: string): number[] {
  const [header, ...lines] = text.trimEnd().split('\n');
  if (header !== 'seenAt\tline') throw new Error(`not a churn commit list: ${header}`);
  return lines.map((line) => Number(line.slice(0, line.indexOf('\t'))));
}

/**
 * The monitor's lag (ms, p50/p90/p99/max): the commits read in the churn against the syncs that
 * ended after its first write, one each; undefined unless they are as many (a sync that committed
 * nothing, or a commit of another process, would pair the rest wrongly).
 */
export function monitorLag(
  commitsSeen: readonly number[],
  syncs: readonly Sync[],
  churnFrom: number,
): Record<string, number> | undefined {
  const churned = syncs.filter((sync) => sync.end >= churnFrom);
  if (commitsSeen.length === 0 || churned.length !== commitsSeen.length) return undefined;
  const lags = commitsSeen.map((seen, i) => seen - churned[i]!.end);
  return Object.fromEntries(
    [50, 90, 99, 100].map((p) => [p === 100 ? 'max' : `p${p}`, round(percentile(lags, p), 2)]),
  );
}

/** The index of the last sync ending at or before `at` (-1: none); `syncs` sorted by end. */
function lastEndingBy(syncs: readonly Sync[], at: number): number {
  let [lo, hi] = [0, syncs.length];
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (syncs[mid]!.end <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** How much of [from, to] the syncs before index `before` ran. */
function busyWithin(syncs: readonly Sync[], before: number, from: number, to: number): number {
  let busy = 0;
  for (let i = before - 1; i >= 0 && syncs[i]!.end > from; i--)
    busy += Math.max(0, Math.min(to, syncs[i]!.end) - Math.max(from, syncs[i]!.start));
  return busy;
}

/** A seen write's latency in its four parts (they sum to it); undefined for one never seen. */
export function breakdown(write: WriteTimes, syncs: readonly Sync[]): Breakdown | undefined {
  const { putAt, seenAt } = write;
  if (seenAt === undefined) return undefined;
  const answered = Math.min(write.answeredAt ?? seenAt, seenAt);
  const index = lastEndingBy(syncs, seenAt);
  const sync = index >= 0 ? syncs[index]! : { start: seenAt, end: seenAt };
  const start = Math.min(Math.max(sync.start, answered), seenAt);
  const end = Math.min(Math.max(sync.end, start), seenAt);
  return {
    latency: seenAt - putAt,
    ack: answered - putAt,
    beforeSync: start - answered,
    sync: end - start,
    afterCommit: seenAt - end,
    busy: busyWithin(syncs, Math.max(index, 0), answered, start),
  };
}

/** The parts' p50 over all seen writes; over the slowest 1 %, their means, which part led, when. */
export function tailReport(writes: readonly WriteTimes[], syncs: readonly Sync[]): Record<string, unknown> {
  const seen = writes.flatMap((write) => {
    const parts = breakdown(write, syncs);
    return parts === undefined ? [] : [{ putAt: write.putAt, parts }];
  });
  if (seen.length === 0) throw new Error('no write was seen');
  const all = seen.map(({ parts }) => parts);
  const p50 = (part: keyof Breakdown) =>
    round(
      percentile(
        all.map((b) => b[part]),
        50,
      ),
      2,
    );
  const p99 = percentile(
    all.map((b) => b.latency),
    99,
  );
  const slow = seen.filter(({ parts }) => parts.latency >= p99);
  const mean = (part: keyof Breakdown) =>
    round(slow.reduce((sum, { parts }) => sum + parts[part], 0) / slow.length, 1);
  const ledBy = Object.fromEntries(PARTS.map((part) => [part, 0]));
  const by5s = new Map<number, number>();
  const firstPut = seen.reduce((min, { putAt }) => Math.min(min, putAt), Number.POSITIVE_INFINITY);
  for (const { putAt, parts } of slow) {
    ledBy[PARTS.reduce((top, part) => (parts[part] > parts[top] ? part : top))]!++;
    const second = Math.floor((putAt - firstPut) / 5000) * 5;
    by5s.set(second, (by5s.get(second) ?? 0) + 1);
  }
  const columns = ['latency', ...PARTS] as const;
  // A tail made at the churn's start (code not yet optimized, a backlog draining) leaves the p99 of
  // the writes after it lower (undefined: no write that late).
  const p99From = (second: number) => {
    const later = seen.filter(({ putAt }) => putAt - firstPut >= second * 1000);
    return later.length === 0
      ? undefined
      : round(
          percentile(
            later.map(({ parts }) => parts.latency),
            99,
          ),
          1,
        );
  };
  return {
    writes: writes.length,
    seen: seen.length,
    syncs: syncs.length,
    p50Ms: Object.fromEntries(columns.map((part) => [part, p50(part)])),
    p99Ms: round(p99, 1),
    p99FromSecondMs: Object.fromEntries([1, 5, 10].map((second) => [second, p99From(second)])),
    slowest: slow.length,
    slowestMeanMs: Object.fromEntries([...columns, 'busy' as const].map((part) => [part, mean(part)])),
    slowestLedBy: ledBy,
    slowestBySecond: Object.fromEntries([...by5s].sort(([a], [b]) => a - b)),
  };
}

if (import.meta.main) {
  const dir = process.argv[2];
  if (dir === undefined) throw new Error('usage: churn-timeline.ts DIR');
  const writes = parseTimeline(readFileSync(join(dir, 'writes.tsv'), 'utf8'));
  const syncs = parseSyncs(readFileSync(join(dir, 'daemon.out'), 'utf8'));
  const commitsFile = join(dir, 'commits.tsv');
  const lag = existsSync(commitsFile)
    ? monitorLag(
        parseCommits(readFileSync(commitsFile, 'utf8')),
        syncs,
        writes.reduce((min, { putAt }) => Math.min(min, putAt), Number.POSITIVE_INFINITY),
      )
    : undefined;
  process.stdout.write(`${JSON.stringify({ ...tailReport(writes, syncs), monitorLagMs: lag }, null, 2)}\n`);
}
