// The localhost NodePort forwarder (nftables mode, kube-proxy's KEP-6032 userspace proxy) with real
// sockets on this process' loopback: which families and ports get a listener, the relay with its
// half-close, random picks and ClientIP affinity, refusal without endpoints, a taken port retried,
// and a removed listener closing what it relays. The kernel test (localhost-node-ports-netns)
// runs it in kproxy run against a pod in another namespace.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, Socket } from 'node:net';
import { test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { LiveDataplane } from '../../contract/dataplane.ts';
import { endpoint, localEndpoint, proxyState, servicePort } from '../../harness/proxy-states.ts';
import {
  explicitLoopbackFamilies,
  LocalhostNodePorts,
  type LocalhostTarget,
  localhostTargets,
} from '../../src/daemon/localhost-node-ports.ts';

test('a family is served when --nodeport-addresses names its loopback address, as kube-proxy reads it', () => {
  const cases: [string[], IPFamily[]][] = [
    [
      ['primary', 'localhost'],
      ['IPv4', 'IPv6'],
    ],
    [['primary', '127.0.0.1/32'], ['IPv4']],
    [['127.0.0.0/8'], ['IPv4']],
    [['::1/128'], ['IPv6']],
    [
      ['all', 'localhost'],
      ['IPv4', 'IPv6'],
    ],
    // Holding loopback by accident is not asking for it.
    [['all'], []],
    [['0.0.0.0/0', '::/0'], []],
    [['primary'], []],
    [['10.0.0.0/8'], []],
    [[], []],
  ];
  for (const [addresses, families] of cases) {
    assert.deepEqual(explicitLoopbackFamilies(addresses), families, addresses.join(','));
  }
});

test('TCP NodePorts with endpoints get a listener: the cluster endpoints, or the local ones under eTP Local', () => {
  const remote = endpoint('10.244.2.5');
  const local = localEndpoint('10.244.1.5');
  const ports = [
    servicePort('web', { nodePort: 30080, clusterEndpoints: [local, remote] }),
    servicePort('local', { nodePort: 30081, clusterEndpoints: [local, remote], externalPolicyLocal: true }),
    servicePort('local-elsewhere', {
      nodePort: 30082,
      clusterEndpoints: [remote],
      externalPolicyLocal: true,
    }),
    servicePort('dns', { nodePort: 30053, protocol: 'UDP', clusterEndpoints: [remote] }),
    servicePort('empty', { nodePort: 30083 }),
    servicePort('cluster-ip', { clusterEndpoints: [remote] }),
    servicePort('sticky', {
      nodePort: 30084,
      clusterEndpoints: [remote],
      sessionAffinity: { timeoutSeconds: 30 },
    }),
  ];
  const state = { IPv4: proxyState('IPv4', ports), IPv6: proxyState('IPv6', ports) };
  const targets = localhostTargets(state, ['IPv4']);
  assert.deepEqual(
    [...targets.values()].map((t) => [t.nodePort, t.endpoints.map((e) => e.ip), t.affinityMs]),
    [
      [30081, ['10.244.1.5'], 0],
      [30084, ['10.244.2.5'], 30_000],
      [30080, ['10.244.1.5', '10.244.2.5'], 0],
    ],
  );
  assert.deepEqual([...localhostTargets(state, ['IPv6']).keys()], ['IPv6 30081', 'IPv6 30084', 'IPv6 30080']);
  assert.equal(localhostTargets(state, []).size, 0);
});

/**
 * Each socket test takes well under a second on loopback; the bound ends a hang (a relay that never
 * closes) as a failure instead of a stuck run.
 */
const HANG = { timeout: 30_000 };

/** A backend on loopback answering each connection with its name, then echoing until the client ends. */
async function backend(t: { after(fn: () => unknown): void }, name: string, host = '127.0.0.1') {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.write(`${name}\n`);
    socket.pipe(socket);
  });
  server.listen(0, host);
  await once(server, 'listening');
  t.after(() => server.close());
  return { ip: host, port: (server.address() as { port: number }).port };
}

/** A port free on loopback now (the node port under test). */
async function freePort(host = '127.0.0.1'): Promise<number> {
  const server = createServer().listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Connects, sends `text`, half-closes, and reads everything the other side sends until it ends. */
async function exchange(port: number, text = 'ping', host = '127.0.0.1'): Promise<string> {
  const socket = new Socket({ allowHalfOpen: true });
  socket.connect(port, host);
  await once(socket, 'connect');
  socket.end(text);
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => (received += chunk));
  await once(socket, 'close');
  return received;
}

/** Connects and says how it went: 'ECONNREFUSED' when nothing listens. */
async function refused(port: number, host = '127.0.0.1'): Promise<string> {
  const socket = new Socket();
  socket.connect(port, host);
  const [error] = (await once(socket, 'error').catch((e) => [e])) as [NodeJS.ErrnoException];
  socket.destroy();
  return error.code ?? String(error);
}

/** Random numbers from a list, in turn. */
function cycle(values: readonly number[]): () => number {
  let next = 0;
  return () => values[next++ % values.length]!;
}

/** The forwarder alone: the dataplane it wraps is not used by update(). */
const unusedDataplane = new Proxy({} as LiveDataplane, {
  get: (_target, key) => {
    throw new Error(`the wrapped dataplane was used (${String(key)})`);
  },
});

function forwarder(t: { after(fn: () => unknown): void }, random: () => number, now = () => 0) {
  const registry = new Registry();
  const ports = new LocalhostNodePorts(unusedDataplane, {
    logger: pino({ level: 'silent' }),
    families: ['IPv4', 'IPv6'],
    registry,
    random,
    now,
  });
  t.after(() => ports.close());
  const metric = async (name: string, family: IPFamily) =>
    (await registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.ip_family === family)?.value;
  return { ports, metric };
}

const target = (
  nodePort: number,
  endpoints: LocalhostTarget['endpoints'],
  affinityMs = 0,
): LocalhostTarget => ({
  family: 'IPv4',
  nodePort,
  servicePort: 'default/web:80/TCP',
  endpoints,
  affinityMs,
});

test(
  'a connection to 127.0.0.1:<nodePort> reaches the endpoint picked at random, both directions and the half-close relayed',
  HANG,
  async (t) => {
    const a = await backend(t, 'a');
    const b = await backend(t, 'b');
    const { ports, metric } = forwarder(t, cycle([0.2, 0.7, 0.4, 0.99]));
    const nodePort = await freePort();
    assert.equal(
      await metric('kubeproxy_nftables_localhost_nodeport_listeners', 'IPv4'),
      0,
      'zero from the start',
    );
    await ports.update(new Map([['IPv4 x', target(nodePort, [a, b])]]));
    assert.equal(await metric('kubeproxy_nftables_localhost_nodeport_listeners', 'IPv4'), 1);
    // The backend sees the client's end only after its bytes, and its answer still comes back.
    assert.deepEqual(
      [await exchange(nodePort, 'one'), await exchange(nodePort, 'two'), await exchange(nodePort, 'three')],
      ['a\none', 'b\ntwo', 'a\nthree'],
    );
    // New endpoints serve the listener's next connection.
    const c = await backend(t, 'c');
    await ports.update(new Map([['IPv4 x', target(nodePort, [c])]]));
    assert.equal(await exchange(nodePort), 'c\nping');
  },
);

test(
  'ClientIP affinity keeps one endpoint while used within the timeout, then picks again',
  HANG,
  async (t) => {
    const a = await backend(t, 'a');
    const b = await backend(t, 'b');
    let clock = 0;
    const picks = [0.1, 0.9];
    const { ports } = forwarder(
      t,
      () => picks.shift()!,
      () => clock,
    );
    const nodePort = await freePort();
    await ports.update(new Map([['IPv4 x', target(nodePort, [a, b], 10_000)]]));
    const names: string[] = [];
    for (const at of [0, 9_000, 18_000, 28_001]) {
      clock = at;
      names.push((await exchange(nodePort)).split('\n')[0]!);
    }
    // Each use renews the 10 s window (a sliding one, as kube-proxy's); 10,001 ms idle ends it.
    assert.deepEqual(names, ['a', 'a', 'a', 'b']);
  },
);

test(
  'without endpoints, or once removed, the port refuses; a removed listener closes the connections it relays',
  HANG,
  async (t) => {
    const a = await backend(t, 'a');
    const { ports, metric } = forwarder(t, () => 0);
    const nodePort = await freePort();
    assert.equal(await refused(nodePort), 'ECONNREFUSED');
    await ports.update(new Map([['IPv4 x', target(nodePort, [a])]]));
    const held = new Socket();
    held.connect(nodePort, '127.0.0.1');
    await once(held, 'data');
    await ports.update(new Map());
    await once(held, 'close');
    assert.equal(await refused(nodePort), 'ECONNREFUSED');
    assert.equal(await metric('kubeproxy_nftables_localhost_nodeport_listeners', 'IPv4'), 0);
  },
);

test(
  'a backend that refuses ends the client connection; a taken port is counted and tried again at the next update',
  HANG,
  async (t) => {
    const { ports, metric } = forwarder(t, () => 0);
    const nodePort = await freePort();
    const gone = await freePort();
    await ports.update(new Map([['IPv4 x', target(nodePort, [{ ip: '127.0.0.1', port: gone }])]]));
    assert.equal(await exchange(nodePort), '', 'the connection ends without an answer');

    const taken: Server = createServer().listen(await freePort(), '127.0.0.1');
    await once(taken, 'listening');
    const takenPort = (taken.address() as { port: number }).port;
    const a = await backend(t, 'a');
    const targets = new Map([['IPv4 y', target(takenPort, [a])]]);
    await ports.update(targets);
    assert.equal(
      await metric('kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total', 'IPv4'),
      1,
    );
    await new Promise((resolve) => taken.close(resolve));
    await ports.update(targets);
    assert.equal(await exchange(takenPort), 'a\nping');
  },
);

test('IPv6: the listener is on ::1', HANG, async (t) => {
  const a = await backend(t, 'a6', '::1');
  const { ports } = forwarder(t, () => 0);
  const nodePort = await freePort('::1');
  await ports.update(new Map([['IPv6 x', { ...target(nodePort, [a]), family: 'IPv6' as const }]]));
  assert.equal(await exchange(nodePort, 'v6', '::1'), 'a6\nv6');
  assert.equal(await refused(nodePort, '127.0.0.1'), 'ECONNREFUSED', 'not on 127.0.0.1');
});

test(
  "a half-close from the backend first is relayed, and the client's bytes after it still reach the backend",
  HANG,
  async (t) => {
    // The backend answers and ends its side at once, then reads what the client sends later.
    let resolveLate: (text: string) => void = () => {};
    const late = new Promise<string>((resolve) => (resolveLate = resolve));
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      socket.end('bye\n');
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk) => (text += chunk));
      socket.on('end', () => resolveLate(text));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => server.close());
    const { ports } = forwarder(t, () => 0);
    const nodePort = await freePort();
    const { port } = server.address() as { port: number };
    await ports.update(new Map([['IPv4 x', target(nodePort, [{ ip: '127.0.0.1', port }])]]));
    const socket = new Socket({ allowHalfOpen: true });
    socket.connect(nodePort, '127.0.0.1');
    socket.setEncoding('utf8');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk));
    await once(socket, 'end');
    assert.equal(answer, 'bye\n');
    socket.end('late words');
    assert.equal(await late, 'late words');
  },
);
