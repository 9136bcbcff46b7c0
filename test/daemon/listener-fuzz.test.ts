// Thousands of random and malformed requests on every port a real daemon listens on (health,
// metrics, a health check node port), from a seeded generator: afterwards the daemon still answers
// /healthz and /metrics, still syncs new Services, never had a handler throw, counted the refusals
// and kept them out of the log above debug. Replay a failure with KPROXY_SEED=<seed>;
// sweep: nice -n 10 node scripts/sweep-seeds.ts test/daemon/listener-fuzz.test.ts --count 2000 --batch 100
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { MAX_HEADER_BYTES, MAX_TARGET_LENGTH } from '../../src/daemon/http-listener.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { freePort } from '../support/free-port.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';
import { eventually } from './daemon-harness.ts';
import { startRecordingDaemon } from './recording-daemon.ts';

/** Requests per listener, and how many are on the wire at once (well under MAX_CONNECTIONS). */
const REQUESTS_PER_LISTENER = 700;
const CONCURRENCY = 8;
/**
 * A peer that stops sending (half-open, truncated) closes its own socket after at most this long:
 * the daemon's own timeouts are tested in http-listener.test.ts, and waiting for them here would
 * only make the run long.
 */
const CLIENT_GIVES_UP_MS = 150;

type Random = () => number;

interface Probe {
  /** Bytes to send, in the chunks they are written in. */
  readonly chunks: readonly Buffer[];
  /** FIN after writing (false: the peer keeps its side open and gives up later). */
  readonly end: boolean;
  /** Reset the connection right after writing instead of reading an answer. */
  readonly reset: boolean;
}

const int = (random: Random, below: number) => Math.floor(random() * below);
const pick = <T>(random: Random, items: readonly T[]): T => items[int(random, items.length)]!;

const PATHS = ['/healthz', '/livez', '/metrics', '/proxyMode', '/', '/other'];
const METHODS = ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'get', 'G ET', 'BREW', ''];
// Pieces that URL parsers and percent-decoders trip on.
const PATH_NOISE = '[ ] ::1] @ :99999 % %zz %ff %00 %2f // .. # ? \\ é \x7f * x'
  .split(' ')
  .concat([' ', '\t']);

function request(method: string, target: string, headers = 'Host: x\r\n', body = ''): string {
  return `${method} ${target} HTTP/1.1\r\n${headers}\r\n${body}`;
}

function randomBytes(random: Random, length: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) bytes[i] = int(random, 256);
  return bytes;
}

/** One request (or pile of bytes) a careless or hostile peer might send. */
const GENERATORS: readonly ((random: Random) => string | Buffer)[] = [
  (random) => randomBytes(random, 1 + int(random, 2000)),
  (random) => {
    const full = request('GET', pick(random, PATHS));
    return full.slice(0, int(random, full.length));
  },
  (random) =>
    request(
      'GET',
      pick(random, PATHS),
      `Host: x\r\nX-Big: ${'a'.repeat(MAX_HEADER_BYTES + int(random, 4096))}\r\n`,
    ),
  (random) => request('GET', `${pick(random, PATHS)}%${String.fromCharCode(33 + int(random, 94))}`),
  (random) => request(pick(random, METHODS), pick(random, PATHS), 'Host: x\r\nContent-Length: 3\r\n', 'abc'),
  (random) => {
    // Targets built from pieces that URL parsers trip on, starting anywhere (e.g. "//[").
    let target = pick(random, ['/', '//', '', 'http://', 'http://x', '*', '%', '\\']);
    for (let i = int(random, 5); i >= 0; i--) target += pick(random, random() < 0.6 ? PATH_NOISE : PATHS);
    return request('GET', target);
  },
  (random) => request('GET', `/${'a'.repeat(MAX_TARGET_LENGTH + int(random, MAX_HEADER_BYTES))}`),
  (random) => {
    // A valid request with a few bytes changed.
    const bytes = Buffer.from(request('GET', pick(random, PATHS)));
    for (let i = int(random, 4); i >= 0; i--) bytes[int(random, bytes.length)] = int(random, 256);
    return bytes;
  },
  (random) => {
    // Pipelined: good and bad requests back to back on one connection.
    const parts = Array.from({ length: 2 + int(random, 6) }, () =>
      random() < 0.6
        ? request(pick(random, ['GET', 'HEAD']), pick(random, PATHS))
        : randomBytes(random, 40).toString('latin1'),
    );
    return parts.join('');
  },
  (random) => {
    const headers = pick(random, [
      'Host: x\r\nTransfer-Encoding: chunked\r\n',
      'Host: x\r\nContent-Length: 99999999999999999999\r\n',
      'Host: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n',
      'Host: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n',
      'Host: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n',
      'Host: x\r\n Folded: header\r\n',
      `Host: x\r\n${'X: y\r\n'.repeat(2000)}`,
      '',
    ]);
    return request(
      pick(random, ['GET', 'POST']),
      pick(random, PATHS),
      headers,
      pick(random, ['', 'zz\r\n', '5\r\nab']),
    );
  },
];

function probe(random: Random): Probe {
  const generated = pick(random, GENERATORS)(random);
  const bytes = typeof generated === 'string' ? Buffer.from(generated, 'latin1') : generated;
  // Sometimes dribbled out in pieces, so the parser sees every split point.
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = random() < 0.7 ? bytes.length : 1 + int(random, 64);
    chunks.push(bytes.subarray(at, at + size));
    at += size;
  }
  return { chunks, end: random() < 0.95, reset: random() < 0.05 };
}

/** Sends a probe and reads until the server closes or the client gives up (resets are expected). */
function send(port: number, { chunks, end, reset }: Probe): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.resume();
    socket.on('error', () => {});
    const giveUp = setTimeout(() => socket.destroy(), CLIENT_GIVES_UP_MS);
    socket.on('close', () => {
      clearTimeout(giveUp);
      resolve();
    });
    socket.once('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
      if (reset) socket.resetAndDestroy();
      else if (end) socket.end();
    });
  });
}

/** Sends the probes to `port`, CONCURRENCY at a time. */
async function fuzz(port: number, probes: readonly Probe[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < probes.length) await send(port, probes[next++]!);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

test('no request on any listener stops the daemon; it keeps serving and syncing', async (t) => {
  const seeds = testSeeds();
  t.diagnostic(seedsLine('listener fuzz', seeds));

  const healthCheckPort = await freePort();
  const lb = sampleService('default', 'lb', { clusterIP: '10.96.0.20' });
  Object.assign(lb.spec as object, {
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    healthCheckNodePort: healthCheckPort,
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30081 }],
  });
  const { api, dataplane, daemon, lines } = await startRecordingDaemon(t, {
    objects: (api) => {
      api.state.apply(SERVICES, lb);
      api.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('default', 'lb-abc', { service: 'lb' }));
      api.state.apply(NODES, sampleNode('node-1'));
    },
  });
  const healthCheckUrl = `http://127.0.0.1:${healthCheckPort}/`;
  await eventually('the health check node port answers 200', async () => {
    const status = await fetch(healthCheckUrl).then(
      (response) => response.status,
      () => 0,
    );
    return status === 200;
  });

  const ports = {
    healthz: Number(new URL(daemon.healthzUrl!).port),
    metrics: Number(new URL(daemon.metricsUrl!).port),
    'health-check-node-port': healthCheckPort,
  };
  // A sweep's seeds fuzz the one daemon in turn: it must come through each.
  let text = '';
  for (const seed of seeds) {
    const random = prng(seed);
    const fuzzStart = Date.now();
    // Drawn before any is sent, so the seed alone decides them (not the order answers come in).
    const probes = Object.values(ports).map(() =>
      Array.from({ length: REQUESTS_PER_LISTENER }, () => probe(random)),
    );
    await Promise.all(Object.values(ports).map((port, i) => fuzz(port, probes[i]!)));

    t.diagnostic(`seed ${seed}: fuzz ${Date.now() - fuzzStart} ms`);
    assert.equal((await fetch(`${daemon.healthzUrl}/healthz`)).status, 200, `seed ${seed}`);
    assert.equal((await fetch(healthCheckUrl)).status, 200, `seed ${seed}`);
    text = await (await fetch(`${daemon.metricsUrl}/metrics`)).text();
    assert.doesNotMatch(text, /reason="handler-error"/, `a handler threw (seed ${seed})`);
  }
  // Counted by the daemon, not judged from what the clients read: a client may give up first.
  const counted = (listener: string, reason: string) =>
    text.match(
      new RegExp(
        `^kproxy_http_refused_requests_total\\{listener="${listener}",reason="${reason}"\\} (\\d+)`,
        'm',
      ),
    )?.[1];
  for (const listener of Object.keys(ports)) {
    for (const reason of ['malformed', 'too-large', 'method']) {
      assert.ok(
        Number(counted(listener, reason)) > 0,
        `${reason} refusals counted on ${listener} (seeds ${seeds[0]}..${seeds.at(-1)})`,
      );
    }
  }
  const refusedLines = lines.filter((line) => line.msg === 'HTTP request refused');
  assert.ok(refusedLines.length > 0);
  assert.ok(
    refusedLines.every((line) => line.level === 20),
    'refusals are logged at debug only',
  );

  api.state.apply(SERVICES, sampleService('default', 'after-fuzz', { clusterIP: '10.96.0.30', port: 8443 }));
  await eventually('the service created after the fuzz is synced', () =>
    [...(dataplane.last?.state.IPv4?.servicePorts.keys() ?? [])].includes('default/after-fuzz:8443/TCP'),
  );
});
