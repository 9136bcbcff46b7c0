import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  breakdown,
  monitorLag,
  parseCommits,
  parseSyncs,
  parseTimeline,
  type Sync,
  tailReport,
} from '../../bench/churn-timeline.ts';

/** Three syncs: back to back from 100 to 150, then one from 160 to 170. */
const SYNCS: readonly Sync[] = [
  { start: 100, end: 110 },
  { start: 110, end: 150 },
  { start: 160, end: 170 },
];

describe('churn timeline', () => {
  it('cuts a write at its answer and the sync that ended last before its sight, parts summing to it', () => {
    const parts = breakdown({ putAt: 0, answeredAt: 5, seenAt: 172 }, SYNCS);
    // Waited 155 ms for the third sync, 50 of them while the first two ran.
    assert.deepEqual(parts, { latency: 172, ack: 5, beforeSync: 155, busy: 50, sync: 10, afterCommit: 2 });
  });

  it('counts a sync that started before the answer only from the answer on', () => {
    assert.deepEqual(breakdown({ putAt: 100, answeredAt: 120, seenAt: 151 }, SYNCS), {
      latency: 51,
      ack: 20,
      beforeSync: 0,
      busy: 0,
      sync: 30,
      afterCommit: 1,
    });
  });

  it('puts a commit seen before the answer in the answer, and a write never seen nowhere', () => {
    // The stand-in sends the watch event before its answer: the commit can come first.
    assert.deepEqual(breakdown({ putAt: 90, answeredAt: 140, seenAt: 112 }, SYNCS), {
      latency: 22,
      ack: 22,
      beforeSync: 0,
      busy: 0,
      sync: 0,
      afterCommit: 0,
    });
    assert.equal(breakdown({ putAt: 0, answeredAt: 5, seenAt: undefined }, SYNCS), undefined);
    // Seen before any sync ended: all of it after the answer, none of it a sync's.
    assert.deepEqual(breakdown({ putAt: 0, answeredAt: 5, seenAt: 50 }, SYNCS)?.beforeSync, 45);
  });

  it('reads the driver timeline and the daemon syncs among V8 traces, in the order syncs ended', () => {
    assert.deepEqual(parseTimeline('write\tputAt\tansweredAt\tseenAt\n0\t1.5\t2.25\t9.000\n1\t3\t\t\n'), [
      { putAt: 1.5, answeredAt: 2.25, seenAt: 9 },
      { putAt: 3, answeredAt: undefined, seenAt: undefined },
    ]);
    assert.throws(() => parseTimeline('k\tat\n'), /not a churn timeline/);
    const log = [
      '{"ts":2000.5,"msg":"rules synced","durationMs":3}',
      '[3824:0x3bbe3000]     2547 ms: Scavenge 5.4 (6.5) -> 4.8 (7.5) MB, pooled: 0 MB, 4.79 / 0.00 ms',
      '{"ts":1000,"msg":"informers synced; starting the sync loop"}',
      '{"ts":1500,"msg":"rules synced","durationMs":400}',
    ].join('\n');
    assert.deepEqual(parseSyncs(log), [
      { start: 1100, end: 1500 },
      { start: 1997.5, end: 2000.5 },
    ]);
  });

  it('names the part that led the slowest writes, and when they came', () => {
    // 99 quick writes, each committed by a sync of its own; one whose commit the monitor showed late.
    const syncs: Sync[] = [];
    const writes = [];
    for (let k = 0; k < 99; k++) {
      const at = k * 1000;
      syncs.push({ start: at + 2, end: at + 4 });
      writes.push({ putAt: at, answeredAt: at + 1, seenAt: at + 5 });
    }
    writes.push({ putAt: 99_000, answeredAt: 99_001, seenAt: 99_400 });
    syncs.push({ start: 99_002, end: 99_004 });
    const report = tailReport(writes, syncs);
    assert.equal(report.p99Ms, 400);
    assert.equal(report.slowest, 1);
    assert.deepEqual(report.slowestLedBy, { ack: 0, beforeSync: 0, sync: 0, afterCommit: 1 });
    assert.deepEqual(report.slowestBySecond, { 95: 1 });
    // The slow write is the last: from second 1 on, it is the p99; none came after second 99.
    assert.deepEqual(report.p99FromSecondMs, { 1: 400, 5: 400, 10: 400 });
    assert.deepEqual(tailReport(writes.slice(0, 2), syncs).p99FromSecondMs, {
      1: 5,
      5: undefined,
      10: undefined,
    });
    assert.deepEqual(report.p50Ms, { latency: 5, ack: 1, beforeSync: 1, sync: 2, afterCommit: 1 });
  });

  it("pairs the churn's commits with the last syncs, one each, for the monitor's lag", () => {
    const commits = parseCommits(
      'seenAt\tline\n112.5\t# new generation 7 by process 42 (node)\n152\t# new generation 8 by process 42 (node)\n171\t# new generation 9 by process 42 (node)\n',
    );
    assert.deepEqual(commits, [112.5, 152, 171]);
    // The first sync (the cold start's) ended before the churn: its commit is not among them.
    const withColdStart = [{ start: 0, end: 50 }, ...SYNCS];
    assert.deepEqual(monitorLag(commits, withColdStart, 90), { p50: 2, p90: 2.5, p99: 2.5, max: 2.5 });
    // As many commits as syncs, or nothing: one sync too many or too few would pair the rest wrongly.
    assert.equal(monitorLag(commits, withColdStart, 0), undefined);
    assert.equal(monitorLag(commits, SYNCS.slice(1), 90), undefined);
    assert.throws(() => parseCommits('write\tputAt\n'), /not a churn commit list/);
  });
});
