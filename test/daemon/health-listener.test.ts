// The /healthz listener on its own thread: kube-proxy's answers as the main thread published them,
// answered while the main thread is blocked, 503 once the main thread's heartbeat is older than
// the bound and never before, and every answer and refusal counted for the metrics. What must come
// before a moment is checked against when each answer was received (an answer received before a
// moment was decided before it), so no wall-clock allowance is needed.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenHealth, REQUESTS_PER_COLLECTION } from '../../src/daemon/health-listener.ts';
import { HealthListenerCounts } from '../../src/daemon/health-listener-counts.ts';
import { SharedHealthState } from '../../src/daemon/health-shared-state.ts';
import type { Refusal } from '../../src/daemon/http-listener.ts';
import { monotonicMs, probeWhileBlocked } from './healthz-prober.ts';

/** The default configuration's: 2 × syncPeriod (30 s), plus one heartbeat period. */
const DEFAULT_STALLED_AFTER_MS = 66_000;

async function started(
  t: { after(fn: () => Promise<unknown>): void },
  stalledAfterMs = DEFAULT_STALLED_AFTER_MS,
) {
  const state = new SharedHealthState();
  const counts = new HealthListenerCounts();
  const refusals: Refusal[] = [];
  const listener = await listenHealth('127.0.0.1', 0, {
    state,
    counts,
    stalledAfterMs,
    onRefused: (refusal) => refusals.push(refusal),
    onFailure: (error) => assert.fail(error),
  });
  t.after(() => listener.close());
  return { state, counts, refusals, listener };
}

describe('the /healthz listener on its own thread (health-listener.ts)', () => {
  test("kube-proxy's headers and bodies, as published; each answer counted before it is sent", async (t) => {
    const { state, counts, listener } = await started(t);
    state.publish({ live: true, nodeEligible: true, lastUpdated: Date.UTC(2026, 11, 6, 8) });
    const before = Date.now();
    let response = await fetch(`${listener.url}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(
      [...response.headers].filter(([name]) => name !== 'date' && name !== 'keep-alive'),
      [
        ['connection', 'keep-alive'],
        ['content-type', 'application/json'],
        ['transfer-encoding', 'chunked'],
        ['x-content-type-options', 'nosniff'],
      ],
    );
    const body = (await response.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body), ['lastUpdated', 'currentTime', 'nodeEligible']);
    assert.equal(body.lastUpdated, body.currentTime, 'healthy: lastUpdated is now, as kube-proxy');
    assert.ok(Date.parse(String(body.currentTime)) >= before);
    assert.deepEqual(counts.take(), { answers: [{ what: ['/healthz', 200], count: 1 }], refusals: [] });

    state.publish({ live: false, nodeEligible: false, lastUpdated: Date.UTC(2026, 11, 6, 8) });
    response = await fetch(`${listener.url}/livez`);
    assert.equal(response.status, 503);
    assert.deepEqual(Object.keys((await response.json()) as object), ['lastUpdated', 'currentTime']);
    response = await fetch(`${listener.url}/healthz`);
    assert.equal(response.status, 503);
    assert.equal(
      ((await response.json()) as { lastUpdated: string }).lastUpdated,
      '2026-12-06T08:00:00.000Z',
    );
    response = await fetch(`${listener.url}/other`);
    assert.equal(response.status, 404);
    assert.equal(response.headers.get('content-type'), 'text/plain');
    assert.equal(await response.text(), '404 page not found\n');
    assert.deepEqual(counts.take(), {
      answers: [
        { what: ['/healthz', 503], count: 1 },
        { what: ['/livez', 503], count: 1 },
      ],
      refusals: [],
    });
  });

  test('answers go on across the collections the thread makes every REQUESTS_PER_COLLECTION requests', async (t) => {
    const { state, counts, listener } = await started(t);
    state.publish({ live: true, nodeEligible: true, lastUpdated: Date.UTC(2026, 11, 6, 8) });
    // Two collections and one request after them (a gc() the thread could not call would be the
    // thread's failure: onFailure fails the test).
    const requests = 2 * REQUESTS_PER_COLLECTION + 1;
    for (let i = 0; i < requests; i++) {
      const response = await fetch(`${listener.url}/healthz`);
      await response.arrayBuffer();
      assert.equal(response.status, 200);
    }
    assert.deepEqual(counts.take(), {
      answers: [{ what: ['/healthz', 200], count: requests }],
      refusals: [],
    });
  });

  test('refusals are counted and reported to the main thread; a port in use rejects with its code', async (t) => {
    const { counts, refusals, listener } = await started(t);
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(listener.port, '127.0.0.1');
      let received = '';
      socket.setEncoding('latin1').on('data', (chunk: string) => {
        received += chunk;
      });
      socket.on('close', () => resolve(received));
      socket.end('POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    assert.match(answer, /^HTTP\/1\.1 405 /);
    assert.deepEqual(counts.take().refusals, [{ what: 'method', count: 1 }]);
    // The report is a message: it arrives once this thread runs.
    while (refusals.length === 0) await sleep(10);
    assert.deepEqual(refusals, [{ reason: 'method', status: 405, detail: 'POST' }]);

    await assert.rejects(
      listenHealth('127.0.0.1', listener.port, {
        state: new SharedHealthState(),
        counts: new HealthListenerCounts(),
        stalledAfterMs: DEFAULT_STALLED_AFTER_MS,
        onFailure: (error) => assert.fail(error),
      }),
      { code: 'EADDRINUSE' },
    );
  });

  test('the main thread blocked for seconds: /healthz is answered meanwhile, 200 under the bound', async (t) => {
    const { listener } = await started(t);
    const { blockedAtMs, resumedAtMs, answers } = await probeWhileBlocked(`${listener.url}/healthz`, 2_000);
    const during = answers.filter((a) => a.sentMs >= blockedAtMs && a.receivedMs < resumedAtMs);
    assert.ok(during.length > 0, `no answer while blocked (${answers.length} in all)`);
    assert.ok(
      during.every((a) => a.status === 200),
      'the block is far under the heartbeat bound',
    );
  });

  test('the heartbeat stops: 503 once it is older than the bound, never before; 200 at the next beat', async (t) => {
    const stalledAfterMs = 300;
    const { state, counts, listener } = await started(t, stalledAfterMs);
    const seen: string[] = [];
    const status = async (path = '/healthz') => {
      const code = (await fetch(`${listener.url}${path}`)).status;
      seen.push(`${path} ${code}`);
      return code;
    };
    const beatenAt = monotonicMs();
    state.beat();
    // Each answer received before the bound was decided before it: 200.
    for (;;) {
      const code = await status();
      if (monotonicMs() >= beatenAt + stalledAfterMs) break;
      assert.equal(code, 200);
    }
    // Sent after it: 503, until the main thread beats again.
    assert.equal(await status(), 503);
    assert.equal(await status('/livez'), 503);
    state.beat();
    assert.equal(await status(), 200);
    // Every answer counted, by its code.
    const tally = new Map(seen.map((s) => [s, seen.filter((x) => x === s).length]));
    assert.deepEqual(
      new Map(counts.take().answers.map(({ what: [path, code], count }) => [`${path} ${code}`, count])),
      tally,
    );
  });
});
