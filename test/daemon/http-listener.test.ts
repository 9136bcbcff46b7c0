// What the shared HTTP listener answers to requests a peer may send on purpose or by accident:
// every one gets a 4xx (or its connection is dropped), is reported, and none reaches past the
// listener into the process.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { listenHealth } from '../../src/daemon/health-listener.ts';
import { HealthListenerCounts } from '../../src/daemon/health-listener-counts.ts';
import { SharedHealthState } from '../../src/daemon/health-shared-state.ts';
import {
  type Handler,
  HEADERS_TIMEOUT_MS,
  listenHttp,
  MAX_CONNECTIONS,
  MAX_HEADER_BYTES,
  MAX_TARGET_LENGTH,
  type Refusal,
  requestPath,
  TIMEOUT_CHECK_INTERVAL_MS,
} from '../../src/daemon/http-listener.ts';
import { eventually } from './daemon-harness.ts';

/** Writes `bytes` (then FIN unless `keepOpen`) and returns everything the server sent until it closed. */
function exchange(port: number, bytes: string, keepOpen = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      received += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    if (keepOpen) socket.write(bytes, 'latin1');
    else socket.end(bytes, 'latin1');
  });
}

const statusOf = (answer: string) => answer.match(/^HTTP\/1\.1 (\d{3}) /)?.[1];
const statusesIn = (answer: string) => [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);

/** A listener whose handler answers 200 with the path it was given; refusals are collected. */
async function echoPathListener(t: { after(fn: () => Promise<unknown>): void }, handler?: Handler) {
  const refusals: Refusal[] = [];
  const server = await listenHttp(
    '127.0.0.1',
    0,
    handler ?? ((path, response) => void response.writeHead(200).end(path)),
    { onRefused: (refusal) => refusals.push(refusal) },
  );
  t.after(() => server.close());
  return { server, refusals };
}

describe('requestPath', () => {
  test('origin and absolute forms give the decoded path without the query', () => {
    const ok = (target: string) => {
      const parsed = requestPath(target);
      return parsed.ok ? parsed.path : parsed.status;
    };
    assert.equal(ok('/healthz'), '/healthz');
    assert.equal(ok('/healthz?verbose=1#x'), '/healthz');
    assert.equal(ok('/health%7a'), '/healthz');
    assert.equal(ok('http://node:10256/healthz?x'), '/healthz');
    assert.equal(ok('HTTP://node'), '/');
    assert.equal(ok('http://node?x'), '/');
    assert.equal(ok('//healthz'), '//healthz', 'not normalised: it is simply not a path served here');
  });

  test('anything else is a 400, an overlong target a 414; nothing throws', () => {
    for (const target of ['//[', '/%zz', '/%ff', '/a b', '/é', '*', 'healthz', '', 'http:/x', 'node:10256']) {
      assert.deepEqual(requestPath(target), { ok: false, status: 400 }, target);
    }
    assert.deepEqual(requestPath(`/${'a'.repeat(MAX_TARGET_LENGTH)}`), { ok: false, status: 414 });
  });
});

describe('HTTP listener', () => {
  test('GET //[ (a target new URL() rejects) gets a 400, and the listener keeps serving', async (t) => {
    const server = await listenHealth('127.0.0.1', 0, {
      state: new SharedHealthState(),
      counts: new HealthListenerCounts(),
      stalledAfterMs: 60_000,
      onFailure: (error) => assert.fail(error),
    });
    t.after(() => server.close());
    const answer = await exchange(server.port, 'GET //[ HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal(statusOf(answer), '400', answer);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  });

  test('a handler that throws, at once or later, gives a 500 and the listener keeps serving', async (t) => {
    const { server, refusals } = await echoPathListener(t, (path, response) => {
      if (path === '/sync') throw new Error('sync bug');
      if (path === '/async') return Promise.reject(new Error('async bug'));
      response.writeHead(200).end();
    });
    assert.equal((await fetch(`${server.url}/sync`)).status, 500);
    assert.equal((await fetch(`${server.url}/async`)).status, 500);
    assert.equal((await fetch(`${server.url}/`)).status, 200);
    assert.deepEqual(
      refusals.map((r) => [r.reason, r.status, r.detail]),
      [
        ['handler-error', 500, 'sync bug'],
        ['handler-error', 500, 'async bug'],
      ],
    );
  });

  test('methods other than GET and HEAD get a 405 naming the allowed ones; HEAD gets headers only', async (t) => {
    const { server, refusals } = await echoPathListener(t);
    const post = await fetch(`${server.url}/healthz`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
    for (const method of ['DELETE', 'OPTIONS', 'CONNECT']) {
      const target = method === 'CONNECT' ? 'node:443' : '/healthz';
      const answer = await exchange(server.port, `${method} ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.equal(statusOf(answer), '405', `${method}: ${answer}`);
    }
    const head = await exchange(
      server.port,
      'HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assert.equal(statusOf(head), '200');
    assert.ok(head.endsWith('\r\n\r\n'), 'no body');
    assert.deepEqual(
      refusals.map((r) => `${r.reason} ${r.status} ${r.detail}`),
      ['method 405 POST', 'method 405 DELETE', 'method 405 OPTIONS', 'method 405 CONNECT'],
    );
  });

  test("what Node's parser rejects gets a 400 or 431 and a closed connection, and is reported", async (t) => {
    const { server, refusals } = await echoPathListener(t);
    const cases: [string, string][] = [
      ['\x16\x03\x01\x02\x00\x01\x00', '400'], // a TLS ClientHello
      ['GET /healthz HTTP/9.9\r\n\r\n', '400'],
      ['GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n', '400'],
      ['GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n', '400'],
      [`GET /healthz HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(MAX_HEADER_BYTES)}\r\n\r\n`, '431'],
      [`GET /${'a'.repeat(MAX_HEADER_BYTES)} HTTP/1.1\r\nHost: x\r\n\r\n`, '431'],
      [`GET /${'a'.repeat(MAX_TARGET_LENGTH)} HTTP/1.1\r\nHost: x\r\n\r\n`, '414'],
    ];
    for (const [bytes, status] of cases) {
      assert.equal(
        statusOf(await exchange(server.port, bytes, true)),
        status,
        JSON.stringify(bytes.slice(0, 60)),
      );
    }
    assert.deepEqual(
      refusals.map((r) => r.reason),
      ['malformed', 'malformed', 'malformed', 'malformed', 'too-large', 'too-large', 'too-large'],
    );
  });

  test('garbage pipelined behind a good request: the good one is answered, then the connection closes', async (t) => {
    const { server } = await echoPathListener(t, async (path, response) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      response.writeHead(200).end(path);
    });
    const answer = await exchange(server.port, 'GET /first HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n', true);
    assert.deepEqual(statusesIn(answer), ['200'], answer);
    // The whole chunked body, and nothing written after it.
    assert.ok(answer.endsWith('\r\n6\r\n/first\r\n0\r\n\r\n'), JSON.stringify(answer));
  });

  test('a peer that connects and sends nothing is cut off after the headers timeout', async (t) => {
    const { server, refusals } = await echoPathListener(t);
    const started = Date.now();
    const answer = await exchange(server.port, '', true);
    const elapsed = Date.now() - started;
    assert.equal(statusOf(answer), '408');
    // Node checks the timeout every TIMEOUT_CHECK_INTERVAL_MS; the rest is room for a busy machine.
    const bound = HEADERS_TIMEOUT_MS + TIMEOUT_CHECK_INTERVAL_MS + 5_000;
    assert.ok(elapsed < bound, `closed after ${elapsed} ms, bound ${bound} ms`);
    assert.deepEqual(
      refusals.map((r) => r.reason),
      ['timeout'],
    );
  });

  test('connections beyond the per-listener limit are dropped at accept; freed ones serve again', async (t) => {
    const { server, refusals } = await echoPathListener(t);
    const idle: Socket[] = [];
    t.after(() => {
      for (const socket of idle) socket.destroy();
    });
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      const socket = connect(server.port, '127.0.0.1');
      socket.on('error', () => {});
      await new Promise((resolve) => socket.once('connect', resolve));
      idle.push(socket);
    }
    // The kernel completes the handshake before Node sees it: the drop shows as a closed connection.
    await assert.rejects(fetch(`${server.url}/healthz`));
    assert.ok(refusals.some((r) => r.reason === 'connection-limit'));
    for (const socket of idle.splice(0)) socket.destroy();
    await eventually('served again once the idle connections are gone', async () => {
      const status = await fetch(`${server.url}/healthz`).then(
        (response) => response.status,
        () => 0,
      );
      return status === 200;
    });
  });
});
