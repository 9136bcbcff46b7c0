import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTestPki, type TestPki } from '../../harness/apiserver/certs.ts';
import { sampleService } from '../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../harness/apiserver/server.ts';
import { isExpired, KubeClient, parseRetryAfter, type WatchItem } from '../../src/kube/client.ts';
import { SERVICES } from '../../src/kube/resources.ts';
import { FileTokenSource, staticTokenSource } from '../../src/kube/token-source.ts';

/** Reads watch items until `count` events arrived (or the stream ended). */
async function take(stream: AsyncIterable<WatchItem>, count: number): Promise<WatchItem[]> {
  const items: WatchItem[] = [];
  for await (const item of stream) {
    items.push(item);
    if (items.filter((i) => i.kind === 'event').length >= count) break;
  }
  return items;
}

function eventSummary(items: readonly WatchItem[]): string[] {
  return items.flatMap((i) =>
    i.kind === 'event'
      ? [`${i.type} ${(i.object as { metadata: { name?: string } }).metadata.name ?? '-'}`]
      : [],
  );
}

/**
 * Short enough to test the timeouts quickly, long enough that the in-process stand-in always answers
 * in time: milliseconds idle, up to a few hundred with CPU hogs beside it.
 */
const HEADERS_TIMEOUT_MS = 2_000;
const LIST_BODY_TIMEOUT_MS = 1_000;

describe('KubeClient against the stand-in API server (plain HTTP)', async () => {
  const server = await startApiServer({ bookmarkIntervalMs: 60_000 });
  const client = new KubeClient(
    { server: server.url },
    { headersTimeoutMs: HEADERS_TIMEOUT_MS, listBodyTimeoutMs: LIST_BODY_TIMEOUT_MS },
  );
  after(async () => {
    await client.close();
    await server.stop();
  });

  test('pages through a list with limit/continue at one resourceVersion', async () => {
    for (let i = 0; i < 25; i++)
      server.state.apply(SERVICES, sampleService('paging', `svc-${String(i).padStart(2, '0')}`));
    const names: string[] = [];
    const versions = new Set<string>();
    let cont: string | undefined;
    let pages = 0;
    do {
      const page = await client.list(SERVICES, {
        limit: 10,
        labelSelector: '',
        ...(cont ? { continue: cont } : {}),
      });
      assert.ok(page.ok, JSON.stringify(page));
      pages++;
      versions.add(page.value.resourceVersion);
      for (const item of page.value.items) names.push((item as { metadata: { name: string } }).metadata.name);
      cont = page.value.continue;
      // A change between pages must not show up in this list: it reads one snapshot.
      if (pages === 1) server.state.apply(SERVICES, sampleService('paging', 'svc-zz-late'));
    } while (cont);
    assert.equal(pages, 3);
    assert.equal(versions.size, 1);
    assert.equal(names.length, 25);
    assert.equal(names[0], 'svc-00');
  });

  test('an expired continue token comes back as a 410 Expired error value', async () => {
    const first = await client.list(SERVICES, { limit: 5 });
    assert.ok(first.ok && first.value.continue);
    server.faults.compact();
    const next = await client.list(SERVICES, { limit: 5, continue: first.value.continue });
    assert.ok(!next.ok);
    assert.ok(isExpired(next.error));
    assert.equal(next.error.kind === 'status' && next.error.reason, 'Expired');
  });

  test('a watch streams changes after the resourceVersion it started from, in order', async () => {
    const listed = await client.list(SERVICES, {});
    assert.ok(listed.ok);
    const watch = await client.watch(SERVICES, {
      resourceVersion: listed.value.resourceVersion,
      timeoutSeconds: 30,
      allowWatchBookmarks: false,
    });
    assert.ok(watch.ok);
    server.state.apply(SERVICES, sampleService('w', 'a'));
    server.state.apply(SERVICES, sampleService('w', 'a', { port: 81 }));
    server.state.delete(SERVICES, 'w', 'a');
    assert.deepEqual(eventSummary(await take(watch.value, 3)), ['ADDED a', 'MODIFIED a', 'DELETED a']);
  });

  test('a quiet watch is not cut by a body timeout', async () => {
    const watch = await client.watch(SERVICES, {
      resourceVersion: String(server.state.resourceVersion),
      timeoutSeconds: 30,
      allowWatchBookmarks: false,
    });
    assert.ok(watch.ok);
    // Past the client's list body timeout (a timer set before this one fires first): a watch must survive it.
    await new Promise((r) => setTimeout(r, 2 * LIST_BODY_TIMEOUT_MS));
    server.state.apply(SERVICES, sampleService('quiet', 'late'));
    assert.deepEqual(eventSummary(await take(watch.value, 1)), ['ADDED late']);
  });

  test('a malformed watch line is reported as an item and the stream goes on', async () => {
    const watch = await client.watch(SERVICES, {
      resourceVersion: String(server.state.resourceVersion),
      timeoutSeconds: 30,
      allowWatchBookmarks: false,
    });
    // The server registers a watch before it sends the headers watch() waited for.
    assert.ok(watch.ok);
    server.faults.writeToWatches('{"type":"ADDED","object":{"metadata"\n');
    server.state.apply(SERVICES, sampleService('m', 'after-garbage'));
    const items = await take(watch.value, 1);
    assert.equal(items[0]?.kind, 'malformed');
    assert.deepEqual(eventSummary(items), ['ADDED after-garbage']);
  });

  test('429 and 500 are classified with Retry-After; a stalled server is a network error', async () => {
    server.faults.failNext(1, 429, 7);
    const throttled = await client.list(SERVICES, {});
    assert.ok(!throttled.ok);
    assert.deepEqual(
      { ...throttled.error, message: undefined },
      { kind: 'status', status: 429, reason: 'TooManyRequests', retryAfterSeconds: 7, message: undefined },
    );
    server.faults.failNext(1, 500);
    const failed = await client.list(SERVICES, {});
    assert.ok(!failed.ok && failed.error.kind === 'status' && failed.error.status === 500);
    server.faults.stallNext(1, 2 * HEADERS_TIMEOUT_MS);
    const stalled = await client.list(SERVICES, {});
    assert.ok(!stalled.ok);
    assert.equal(stalled.error.kind, 'network');
    assert.match(stalled.error.message, /timeout/i);
  });

  test('an unreachable server is a network error value, not an exception', async () => {
    const dead = new KubeClient({ server: 'http://127.0.0.1:1' });
    const result = await dead.list(SERVICES, {});
    await dead.close();
    assert.ok(!result.ok);
    assert.equal(result.error.kind, 'network');
  });
});

describe('Retry-After parsing', () => {
  test('reads delay-seconds and HTTP dates', () => {
    assert.equal(parseRetryAfter('3'), 3);
    assert.equal(parseRetryAfter('Wed, 02 Dec 2026 12:00:10 GMT', Date.parse('2026-12-02T12:00:00Z')), 10);
    assert.equal(parseRetryAfter('soon'), undefined);
    assert.equal(parseRetryAfter(undefined), undefined);
  });
});

describe('KubeClient authentication', () => {
  let pki: TestPki;
  before(() => {
    pki = makeTestPki();
  });
  after(() => pki.remove());

  test('a client certificate signed by the cluster CA is accepted; without one the answer is 401', async () => {
    const server = await startApiServer({
      tls: { cert: pki.serverCert, key: pki.serverKey, clientCa: pki.caCert },
    });
    const withCert = new KubeClient({
      server: server.url,
      ca: pki.caCert,
      cert: pki.clientCert,
      key: pki.clientKey,
    });
    const withoutCert = new KubeClient({ server: server.url, ca: pki.caCert });
    try {
      const ok = await withCert.list(SERVICES, {});
      assert.ok(ok.ok, JSON.stringify(ok));
      const denied = await withoutCert.list(SERVICES, {});
      assert.ok(!denied.ok && denied.error.kind === 'status' && denied.error.status === 401);
    } finally {
      await withCert.close();
      await withoutCert.close();
      await server.stop();
    }
  });

  test('a server certificate from an unknown CA is refused unless insecure-skip-tls-verify', async () => {
    const server = await startApiServer({ tls: { cert: pki.serverCert, key: pki.serverKey }, tokens: ['t'] });
    const strict = new KubeClient({ server: server.url, tokenSource: staticTokenSource('t') });
    const insecure = new KubeClient({
      server: server.url,
      insecureSkipTlsVerify: true,
      tokenSource: staticTokenSource('t'),
    });
    try {
      const refused = await strict.list(SERVICES, {});
      assert.ok(!refused.ok && refused.error.kind === 'network');
      assert.ok((await insecure.list(SERVICES, {})).ok);
    } finally {
      await strict.close();
      await insecure.close();
      await server.stop();
    }
  });

  test('a rotated token file is picked up after the server stops accepting the old token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kproxy-token-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'token-one\n');
    const server = await startApiServer({ tokens: ['token-one'] });
    // A long cache: only the 401 can make the client re-read the file.
    const client = new KubeClient({
      server: server.url,
      tokenSource: new FileTokenSource(tokenFile, { maxAgeMs: 3_600_000 }),
    });
    try {
      assert.ok((await client.list(SERVICES, {})).ok);
      server.setTokens(['token-two']);
      writeFileSync(tokenFile, 'token-two\n');
      const after = await client.list(SERVICES, {});
      assert.ok(after.ok, JSON.stringify(after));
      assert.equal(server.requests.at(-1)?.authorization, 'Bearer token-two');
    } finally {
      await client.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
