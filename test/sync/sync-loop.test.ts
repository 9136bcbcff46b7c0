import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SyncKind, SyncOutcome } from '../../contract/dataplane.ts';
import { type Syncer, SyncLoop, type SyncLoopEvent } from '../../src/sync/sync-loop.ts';
import { FakeClock, flush } from './fake-clock.ts';

const MIN = 1_000;
const PERIOD = 30_000;

interface Call {
  readonly kind: SyncKind;
  readonly at: number;
}

/** A syncer that records calls; `fail` makes the next syncs throw, `hold` keeps them in flight. */
class FakeSyncer implements Syncer {
  readonly calls: Call[] = [];
  intactCalls = 0;
  intactAnswer = true;
  failNext = 0;
  inFlight = 0;
  maxInFlight = 0;
  #release: (() => void) | undefined;
  hold = false;
  readonly clock: FakeClock;

  constructor(clock: FakeClock) {
    this.clock = clock;
  }

  async sync(kind: SyncKind): Promise<SyncOutcome> {
    this.calls.push({ kind, at: this.clock.now() });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.hold) await new Promise<void>((resolve) => (this.#release = resolve));
      if (this.failNext > 0) {
        this.failNext--;
        throw new Error('nft: transaction failed');
      }
      return { kind, objectCount: 7, conntrack: [] };
    } finally {
      this.inFlight--;
    }
  }

  async intact(): Promise<boolean> {
    this.intactCalls++;
    return this.intactAnswer;
  }

  release(): void {
    this.hold = false;
    this.#release?.();
  }
}

function setup(fullSyncPeriodMs?: number) {
  const clock = new FakeClock();
  const syncer = new FakeSyncer(clock);
  const events: SyncLoopEvent[] = [];
  const loop = new SyncLoop({
    clock,
    syncer,
    minSyncPeriodMs: MIN,
    syncPeriodMs: PERIOD,
    fullSyncPeriodMs,
    onEvent: (e) => events.push(e),
  });
  const t0 = clock.now();
  return { clock, syncer, events, loop, t0 };
}

async function startedAndSynced(fullSyncPeriodMs?: number) {
  const s = setup(fullSyncPeriodMs);
  s.loop.start();
  await s.clock.advance(0);
  assert.equal(s.syncer.calls.length, 1);
  return s;
}

describe('SyncLoop', () => {
  test('does not sync before start(), however many changes arrive', async () => {
    const { clock, syncer, loop } = setup();
    loop.requestSync();
    loop.requestSync({ full: true });
    await clock.advance(10 * PERIOD);
    assert.equal(syncer.calls.length, 0);
    assert.equal(syncer.intactCalls, 0);
  });

  test('the first sync after start() is full, runs at once, and is reported with reason start', async () => {
    const { clock, syncer, events, loop, t0 } = setup();
    loop.start();
    await clock.advance(0);
    assert.deepEqual(syncer.calls, [{ kind: 'full', at: t0 }]);
    const synced = events.find((e) => e.type === 'synced');
    assert.ok(synced && synced.type === 'synced');
    assert.equal(synced.reason, 'start');
    assert.equal(synced.outcome.objectCount, 7);
  });

  test('a burst of changes right after a sync becomes one incremental sync minSyncPeriod later', async () => {
    const { clock, syncer, loop, t0 } = await startedAndSynced();
    await clock.advance(100);
    for (let i = 0; i < 50; i++) loop.requestSync();
    await clock.advance(400);
    loop.requestSync();
    await clock.advance(MIN - 501);
    assert.equal(syncer.calls.length, 1, 'no sync before minSyncPeriod has passed');
    await clock.advance(1);
    assert.deepEqual(syncer.calls[1], { kind: 'incremental', at: t0 + MIN });
    await clock.advance(5 * MIN);
    assert.equal(syncer.calls.length, 2);
  });

  test('changes delivered in one tick after a quiet spell are synced together without waiting', async () => {
    const { clock, syncer, loop, t0 } = await startedAndSynced();
    await clock.advance(10 * MIN);
    loop.requestSync();
    loop.requestSync();
    loop.requestSync();
    await clock.advance(0);
    assert.deepEqual(syncer.calls.slice(1), [{ kind: 'incremental', at: t0 + 10 * MIN }]);
  });

  test('never runs two syncs at once; a change during a sync gets its own sync afterwards', async () => {
    const { clock, syncer, loop } = setup();
    syncer.hold = true;
    loop.start();
    await clock.advance(0);
    loop.requestSync();
    await clock.advance(5 * MIN);
    assert.equal(syncer.calls.length, 1);
    syncer.release();
    await clock.advance(0);
    assert.equal(syncer.calls.length, 2);
    assert.equal(syncer.calls[1]?.kind, 'incremental');
    assert.equal(syncer.maxInFlight, 1);
  });

  test('a full sync requested (node labels changed) is full even among incremental changes', async () => {
    const { clock, syncer, events, loop } = await startedAndSynced();
    loop.requestSync();
    loop.requestSync({ full: true });
    loop.requestSync();
    await clock.advance(MIN);
    assert.equal(syncer.calls[1]?.kind, 'full');
    const last = events.at(-1);
    assert.ok(last?.type === 'synced' && last.reason === 'full-requested');
  });

  test('a full request arriving during an incremental sync is not lost', async () => {
    const { clock, syncer, loop } = await startedAndSynced();
    syncer.hold = true;
    loop.requestSync();
    await clock.advance(MIN);
    assert.equal(syncer.calls[1]?.kind, 'incremental');
    loop.requestSync({ full: true });
    syncer.release();
    await clock.advance(MIN);
    assert.equal(syncer.calls[2]?.kind, 'full');
  });

  test('after a failure the retry is full, with exponential backoff capped at syncPeriod', async () => {
    const { clock, syncer, events, loop, t0 } = setup();
    syncer.failNext = 7;
    loop.start();
    await clock.advance(10 * PERIOD);
    const failures = events.filter((e) => e.type === 'failed');
    assert.deepEqual(
      failures.map((e) => e.type === 'failed' && e.retryInMs),
      [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000],
    );
    assert.ok(syncer.calls.every((c) => c.kind === 'full'));
    assert.deepEqual(
      syncer.calls.map((c) => c.at - t0),
      [0, 1_000, 3_000, 7_000, 15_000, 31_000, 61_000, 91_000],
    );
    const recovered = events.find((e) => e.type === 'synced');
    assert.ok(recovered?.type === 'synced' && recovered.reason === 'retry');
  });

  test('a success resets the backoff', async () => {
    const { clock, syncer, events, loop } = await startedAndSynced();
    syncer.failNext = 1;
    loop.requestSync();
    await clock.advance(MIN);
    loop.requestSync();
    await clock.advance(MIN);
    assert.equal(syncer.calls.length, 3, 'retry ran after the first backoff step');
    syncer.failNext = 1;
    loop.requestSync();
    await clock.advance(MIN);
    const failures = events.filter((e) => e.type === 'failed');
    assert.deepEqual(
      failures.map((e) => e.type === 'failed' && e.retryInMs),
      [1_000, 1_000],
    );
  });

  test('every syncPeriod without changes, a cheap intact() check runs and no sync when intact', async () => {
    const { clock, syncer, events } = await startedAndSynced();
    await clock.advance(PERIOD - 1);
    assert.equal(syncer.intactCalls, 0);
    await clock.advance(1);
    assert.equal(syncer.intactCalls, 1);
    await clock.advance(2 * PERIOD);
    assert.equal(syncer.intactCalls, 3);
    assert.equal(syncer.calls.length, 1);
    assert.equal(events.filter((e) => e.type === 'checked').length, 3);
  });

  test('a periodic check that finds the rules damaged repairs them with a full sync', async () => {
    const { clock, syncer, events, t0 } = await startedAndSynced();
    syncer.intactAnswer = false;
    await clock.advance(PERIOD);
    assert.deepEqual(syncer.calls[1], { kind: 'full', at: t0 + PERIOD });
    const last = events.at(-1);
    assert.ok(last?.type === 'synced' && last.reason === 'drift');
  });

  test('damage found by the check is a queued change until the repair has synced', async () => {
    const { clock, syncer, events, t0 } = await startedAndSynced();
    syncer.intactAnswer = false;
    syncer.hold = true;
    await clock.advance(PERIOD);
    assert.deepEqual(
      events.slice(-1),
      [{ type: 'queued', at: t0 + PERIOD }],
      'queued as soon as it is found, while the repair is in flight',
    );
    syncer.release();
    await flush();
    assert.ok(events.at(-1)?.type === 'synced');
  });

  const HOUR = 3_600_000;

  test('a full sync is forced every fullSyncPeriod, even when nothing changed and the check passes', async () => {
    const { clock, syncer, events, t0 } = await startedAndSynced(HOUR);
    await clock.advance(HOUR - 1);
    assert.equal(syncer.calls.length, 1, 'only intact() checks before the hour is up');
    await clock.advance(1);
    assert.deepEqual(
      syncer.calls[1],
      { kind: 'full', at: t0 + HOUR },
      'due exactly an hour after the last full sync',
    );
    const last = events.at(-1);
    assert.ok(last?.type === 'synced' && last.reason === 'periodic');
    assert.ok(
      events.every((e) => e.type !== 'queued' || e.at === t0),
      'nothing is known to be wrong: not a queued change',
    );
    await clock.advance(HOUR);
    assert.deepEqual(syncer.calls[2], { kind: 'full', at: t0 + 2 * HOUR });
  });

  test('the forced full sync counts from the last full one, and makes a pending change full', async () => {
    const { clock, syncer, loop, t0 } = await startedAndSynced(HOUR);
    // A drift repair at PERIOD is a full sync: the hour restarts there.
    syncer.intactAnswer = false;
    await clock.advance(PERIOD);
    syncer.intactAnswer = true;
    assert.deepEqual(syncer.calls[1], { kind: 'full', at: t0 + PERIOD });
    const due = t0 + PERIOD + HOUR;
    await clock.advance(HOUR - 1);
    syncer.hold = true;
    loop.requestSync();
    await clock.advance(0);
    loop.requestSync();
    syncer.release();
    await clock.advance(MIN);
    assert.deepEqual(syncer.calls.slice(2), [
      { kind: 'incremental', at: due - 1 },
      { kind: 'full', at: due - 1 + MIN },
    ]);
    loop.requestSync();
    await clock.advance(MIN);
    assert.equal(syncer.calls.at(-1)?.kind, 'incremental', 'the next change is incremental again');
  });

  test('fullSyncPeriod 0 never forces a full sync', async () => {
    const { clock, syncer } = await startedAndSynced(0);
    await clock.advance(3 * HOUR);
    assert.equal(syncer.calls.length, 1);
    assert.equal(syncer.intactCalls, (3 * HOUR) / PERIOD);
  });

  test('the periodic timer restarts after each sync, so a busy loop does not also run checks', async () => {
    const { clock, syncer, loop } = await startedAndSynced();
    for (let i = 0; i < 10; i++) {
      await clock.advance(PERIOD / 2);
      loop.requestSync();
      await clock.advance(0);
    }
    assert.equal(syncer.intactCalls, 0);
    assert.equal(syncer.calls.length, 11);
  });

  test('every request and the start are reported as queued, with their time', async () => {
    const { clock, events, loop, t0 } = setup();
    loop.requestSync();
    await clock.advance(500);
    loop.requestSync({ full: true });
    loop.start();
    await clock.advance(MIN);
    loop.requestSync();
    assert.deepEqual(
      events.filter((e) => e.type === 'queued').map((e) => e.type === 'queued' && e.at - t0),
      [0, 500, 500, 500 + MIN],
    );
  });

  test('stop() waits for the sync in flight and nothing runs afterwards', async () => {
    const { clock, syncer, loop } = setup();
    syncer.hold = true;
    loop.start();
    await clock.advance(0);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await flush();
    assert.equal(stopped, false);
    syncer.release();
    await stopping;
    loop.requestSync({ full: true });
    await clock.advance(10 * PERIOD);
    assert.equal(syncer.calls.length, 1);
    assert.equal(syncer.intactCalls, 0);
    assert.equal(clock.pendingTimers, 0);
  });
});
