import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startApiServer } from '../../harness/apiserver/server.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { TokenBucket } from '../../src/kube/rate-limiter.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { FakeClock } from '../sync/fake-clock.ts';

describe('TokenBucket (client-go flowcontrol)', () => {
  test('burst at once, then one every 1/qps seconds; idle time refills up to burst only', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket(5, 3, clock);
    assert.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve()], [0, 0, 0]);
    // On credit, in arrival order: 200 ms, 400 ms, 600 ms at 5 qps.
    const waits = [bucket.reserve(), bucket.reserve(), bucket.reserve()];
    assert.deepEqual(
      waits.map((w) => Math.round(w)),
      [200, 400, 600],
    );
    // A minute idle refills to burst (3), not to 300.
    await clock.advance(60_000);
    assert.deepEqual(
      [0, 1, 2, 3].map(() => Math.round(bucket.reserve())),
      [0, 0, 0, 200],
    );
  });

  test('wait() resolves when the token is due; an abort gives the token back', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket(2, 1, clock);
    assert.equal(await bucket.wait(), true);
    let second: boolean | undefined;
    void bucket.wait().then((v) => (second = v));
    await clock.advance(499);
    assert.equal(second, undefined, 'not before 1/qps = 500 ms');
    await clock.advance(1);
    assert.equal(second, true);

    const controller = new AbortController();
    let third: boolean | undefined;
    void bucket.wait(controller.signal).then((v) => (third = v));
    controller.abort();
    await clock.advance(0);
    assert.equal(third, false);
    // The aborted waiter's token came back: the next one waits 500 ms from the second, not 1000.
    assert.equal(Math.round(bucket.reserve()), 500);
  });

  test('refuses a bucket that would never let a request through', () => {
    assert.throws(() => new TokenBucket(0, 10, new FakeClock()), /qps > 0/);
    assert.throws(() => new TokenBucket(5, 0, new FakeClock()), /burst >= 1/);
  });

  test('KubeClient takes a token per list and per watch start', async () => {
    const server = await startApiServer({ bookmarkIntervalMs: 60_000 });
    const clock = new FakeClock();
    const client = new KubeClient({ server: server.url }, { rateLimiter: new TokenBucket(1, 2, clock) });
    try {
      const listed = () => server.requests.filter((r) => r.method === 'GET').length;
      const before = listed();
      const lists = [1, 2, 3].map(() => client.list(SERVICES, {}));
      const [a, b] = await Promise.all(lists.slice(0, 2));
      assert.ok(a?.ok && b?.ok);
      await clock.advance(0);
      assert.equal(listed() - before, 2, 'the third list waits for a token');
      await clock.advance(1000);
      assert.ok((await lists[2])?.ok);
      assert.equal(listed() - before, 3);

      // A watch takes one token when it starts; the events it then carries take none.
      const watch = client.watch(SERVICES, { timeoutSeconds: 30, allowWatchBookmarks: false });
      await clock.advance(0);
      assert.equal(listed() - before, 3, 'the watch waits for a token too');
      await clock.advance(1000);
      const started = await watch;
      assert.ok(started.ok);
      assert.equal(listed() - before, 4);
    } finally {
      await client.close();
      await server.stop();
    }
  });
});
