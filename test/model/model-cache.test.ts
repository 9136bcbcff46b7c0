// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/model/model-cache.test.ts --name 'random change sequences|many slices'
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import { ChunkedList } from '../../contract/chunked-list.ts';
import type { DualStackState, ProxyState, ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, KubeObject, Node, Service } from '../../src/kube/objects.ts';
import { buildProxyState } from '../../src/model/build-state.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import type { ProxyOptions } from '../../src/model/node-settings.ts';
import { prng } from '../support/prng.ts';
import { testSeeds } from '../support/seeds.ts';
import { endpoint, node, options, service, slice, THIS_NODE } from './fixtures.ts';
import { feed, WIDE_NODE, WideServiceChanges } from './wide-service-changes.ts';

function decoded<T extends KubeObject>(raw: T): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') assert.fail(`fixture does not decode: ${JSON.stringify(result)}`);
  return result.object as T;
}

/** Whole numbers in [0, n) from the shared seeded source, so a failing seed can be replayed. */
function random(seed: number): (n: number) => number {
  const next = prng(seed);
  return (n) => Math.floor(next() * n);
}

const NAMES = ['a', 'b', 'c', 'd', 'e'];
const DUAL_STACK: Partial<ProxyOptions> = { nodeIPs: [], clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/32'] };

/** Creation times: few, so ties (decided by name) happen; now and then none at all. */
const CREATED = ['2025-01-01T00:00:00Z', '2025-06-01T00:00:00Z', '2026-01-01T00:00:00+01:00'];

/**
 * Each name has its own addresses, but now and then a service takes another one's cluster IP (in
 * another spelling), external IP or LoadBalancer IP, or node port: conflicts the model resolves.
 */
function randomService(pick: (n: number) => number): Service {
  const name = NAMES[pick(NAMES.length)]!;
  const own = NAMES.indexOf(name);
  const i = pick(4) === 0 ? pick(NAMES.length) : own;
  const v4 = pick(2) === 0 ? `10.96.0.${10 + i}` : `010.96.0.0${10 + i}`;
  const v6 = `fd00:96::${10 + i}`;
  const other = () => [`10.96.0.${10 + pick(NAMES.length)}`, `fd00:96::${10 + pick(NAMES.length)}`][pick(2)]!;
  const clusterIPs = [[v4], [v6], [v4, v6], ['None']][pick(4)]!;
  const ports = [{ name: 'http', port: 80, protocol: 'TCP' }];
  if (pick(2) === 0) ports.push({ name: 'dns', port: 53, protocol: 'UDP' });
  if (pick(3) === 0) ports.push({ name: 'extra', port: 8000 + pick(3), protocol: 'TCP' });
  const type = ['ClusterIP', 'NodePort', 'LoadBalancer'][pick(3)]!;
  const nodePorts = pick(3) === 0 ? 10 * pick(NAMES.length) : 10 * own;
  const created = pick(4) === 0 ? undefined : CREATED[pick(CREATED.length)];
  const ingress = type === 'LoadBalancer' && pick(2) === 0 ? [{ ip: other() }] : undefined;
  return decoded(
    service(
      name,
      {
        type,
        clusterIP: clusterIPs[0]!,
        clusterIPs,
        ports: ports.map((p, j) => (type === 'ClusterIP' ? p : { ...p, nodePort: 30000 + nodePorts + j })),
        ...(pick(3) === 0 && { externalIPs: [other(), other()] }),
        ...(pick(2) === 0 && { externalTrafficPolicy: 'Local' }),
        ...(pick(3) === 0 && { internalTrafficPolicy: 'Local' }),
        ...(pick(4) === 0 && { sessionAffinity: 'ClientIP' }),
      },
      { ...(created && { created }), ...(ingress && { ingress }) },
    ),
  );
}

function randomSlice(pick: (n: number) => number): EndpointSlice {
  const owner = NAMES[pick(NAMES.length)]!;
  const v6 = pick(3) === 0;
  const endpoints = Array.from({ length: pick(4) }, () =>
    endpoint(v6 ? `fd00:244::${1 + pick(6)}` : `10.244.1.${1 + pick(6)}`, {
      ready: [true, false, null][pick(3)]!,
      terminating: pick(4) === 0,
      nodeName: [THIS_NODE, 'node-2'][pick(2)]!,
      ...(pick(5) === 0 && { zones: [['zone-a', 'zone-b'][pick(2)]!] }),
    }),
  );
  const ports = [{ name: 'http', port: 8080, protocol: 'TCP' }];
  if (pick(2) === 0) ports.push({ name: 'dns', port: 5353, protocol: 'UDP' });
  const raw = slice(owner, endpoints, {
    // A slice may move to another service: its name does not follow its owner.
    name: `slice-${pick(6)}`,
    addressType: v6 ? 'IPv6' : 'IPv4',
    ports,
  });
  // Now and then a slice without its service-name label: a problem, and it belongs to no service.
  if (pick(8) === 0) return decoded({ ...raw, metadata: { ...raw.metadata, labels: {} } });
  return decoded(raw);
}

function randomNode(pick: (n: number) => number): Node | undefined {
  if (pick(5) === 0) return undefined;
  const internalIPs = [['192.168.0.1'], ['192.168.0.1', 'fd00::1'], ['fd00::1']][pick(3)]!;
  return decoded(node(THIS_NODE, { internalIPs, zone: ['zone-a', 'zone-b'][pick(2)]! }));
}

function keyOf(object: {
  readonly metadata: { readonly namespace?: string; readonly name: string };
}): string {
  return `${object.metadata.namespace ?? 'default'}/${object.metadata.name}`;
}

function allChanged(prev: DualStackState, next: DualStackState): Set<ServicePortKey> {
  return new Set([
    ...changedServicePorts(prev.IPv4, next.IPv4),
    ...changedServicePorts(prev.IPv6, next.IPv6),
  ]);
}

/**
 * The state with each map as its entries in iteration order, so order is compared too, and each
 * endpoint list an array (a ChunkedList holds the same endpoints in chunks).
 */
export function plain(state: DualStackState): unknown {
  const port = (sp: ServicePort) => ({
    ...sp,
    clusterEndpoints: [...sp.clusterEndpoints],
    localEndpoints: [...sp.localEndpoints],
    ...(sp.otherServingEndpoints && { otherServingEndpoints: [...sp.otherServingEndpoints] }),
  });
  const family = (s: ProxyState | undefined) =>
    s && {
      family: s.family,
      node: s.node,
      servicePorts: [...s.servicePorts].map(([key, sp]) => [key, port(sp)]),
    };
  return { IPv4: family(state.IPv4), IPv6: family(state.IPv6) };
}

function sortedProblems(problems: readonly { object: string; reason: string }[]): string[] {
  return problems.map((p) => `${p.object}: ${p.reason}`).sort();
}

describe('ModelCache', () => {
  it('agrees with buildProxyState, state and changed set, after random change sequences', () => {
    const seeds = testSeeds({ first: 1, count: 60 });
    let conflicts = 0;
    for (const seed of seeds) {
      const pick = random(seed);
      const opts = options(DUAL_STACK);
      // Endpoint lists of a few are chunked at odd seeds (contract/chunked-list.ts).
      const cache = new ModelCache(opts, seed % 2 === 1 ? { chunkedFrom: 2, chunk: 2 } : undefined);
      const services = new Map<string, Service>();
      const slices = new Map<string, EndpointSlice>();
      let thisNode: Node | undefined;
      let prev: DualStackState = {};
      let prevCached: DualStackState = {};
      for (let step = 0; step < 40; step++) {
        const changes = 1 + pick(3);
        for (let c = 0; c < changes; c++) {
          const what = pick(10);
          if (what < 3) {
            const s = randomService(pick);
            services.set(keyOf(s), s);
            cache.setService(s);
          } else if (what < 4) {
            const s = [...services.values()][pick(services.size)];
            if (s === undefined) continue;
            services.delete(keyOf(s));
            cache.deleteService(s);
          } else if (what < 8) {
            const s = randomSlice(pick);
            slices.set(keyOf(s), s);
            cache.setEndpointSlice(s);
          } else if (what < 9) {
            const s = [...slices.values()][pick(slices.size)];
            if (s === undefined) continue;
            slices.delete(keyOf(s));
            cache.deleteEndpointSlice(s);
          } else {
            thisNode = randomNode(pick);
            cache.setNode(thisNode);
          }
        }
        const update = cache.update();
        const expected = buildProxyState(
          {
            services: [...services.values()],
            endpointSlices: [...slices.values()],
            ...(thisNode && { node: thisNode }),
          },
          opts,
        );
        const where = `seed ${seed}, step ${step}`;
        assert.deepEqual(plain(update.state), plain(expected.state), where);
        const expectedChanged = [...allChanged(prev, expected.state)].sort();
        assert.deepEqual([...update.changed].sort(), expectedChanged, `${where}: changed`);
        // The dataplanes' own comparison of consecutive cache states takes the layered shortcut.
        assert.deepEqual([...allChanged(prevCached, update.state)].sort(), expectedChanged, where);
        assert.deepEqual(sortedProblems(update.problems), sortedProblems(expected.problems), where);
        conflicts += expected.problems.filter((p) => p.reason.includes('goes without it')).length;
        prev = expected.state;
        prevCached = update.state;
      }
    }
    // The generator makes ~17 a seed: more than one a seed on average, in any sweep's batch.
    assert.ok(conflicts > seeds.length, `the changes make conflicts (${conflicts} seen)`);
  });

  it('shares every untouched service port with the previous state, and reports only the touched one', () => {
    const cache = new ModelCache(options());
    for (const name of NAMES) {
      cache.setService(decoded(service(name, { clusterIP: `10.96.0.${10 + NAMES.indexOf(name)}` })));
      cache.setEndpointSlice(decoded(slice(name, [endpoint('10.244.1.1')])));
    }
    const first = cache.update();
    assert.equal(first.full, true);
    cache.setEndpointSlice(decoded(slice('c', [endpoint('10.244.1.2')])));
    const second = cache.update();
    assert.equal(second.full, false);
    assert.deepEqual([...second.changed], ['default/c:80/TCP']);
    const before = first.state.IPv4!.servicePorts;
    const after = second.state.IPv4!.servicePorts;
    for (const [key, port] of after) {
      if (key === 'default/c:80/TCP') assert.notEqual(port, before.get(key));
      else assert.equal(port, before.get(key), `${key} is a new object although it did not change`);
    }
    assert.equal(second.state.IPv4!.node, first.state.IPv4!.node);
  });

  it("keeps the objects of a changed slice's unchanged endpoints: a dataplane finds the change by identity", () => {
    const cache = new ModelCache(options());
    cache.setService(decoded(service('web')));
    const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.244.1.${i + 1}`);
    cache.setEndpointSlice(
      decoded(
        slice(
          'web',
          ips(5).map((ip) => endpoint(ip)),
        ),
      ),
    );
    const first = cache.update().state.IPv4!.servicePorts.get('default/web:80/TCP')!;
    // One endpoint goes not ready, one comes; the other three are the same.
    const next = ips(6).map((ip, i) => endpoint(ip, i === 1 ? { ready: false } : {}));
    cache.setEndpointSlice(
      decoded(
        slice(
          'web',
          next.filter((_, i) => i !== 3),
        ),
      ),
    );
    const second = cache.update().state.IPv4!.servicePorts.get('default/web:80/TCP')!;
    const kept = second.clusterEndpoints.filter((ep) => first.clusterEndpoints.includes(ep));
    assert.deepEqual(
      kept.map((ep) => ep.ip),
      ['10.244.1.1', '10.244.1.3', '10.244.1.5'],
    );
  });

  it('keeps the whole state when a change leaves every service port as it was', () => {
    const cache = new ModelCache(options());
    cache.setService(decoded(service('web')));
    const first = cache.update();
    // A slice that names no port of the service changes nothing a dataplane sees.
    cache.setEndpointSlice(decoded(slice('web', [endpoint('10.244.1.1')], { ports: [] })));
    const second = cache.update();
    assert.equal(second.changed.size, 0);
    assert.equal(second.state.IPv4, first.state.IPv4);
  });

  it('a Service with many slices, its lists chunked: every state and changed set as built from scratch', () => {
    let chunked = 0;
    for (const seed of testSeeds({ first: 1, count: 20 })) {
      const pick = random(seed);
      const wide = new WideServiceChanges(pick);
      const opts = options();
      const cache = new ModelCache(opts, { chunkedFrom: 8, chunk: 4 });
      cache.setNode(WIDE_NODE);
      cache.setService(wide.service);
      feed(cache, wide.initial());
      let prev: DualStackState = {};
      for (let step = 0; step < 80; step++) {
        if (step > 0) feed(cache, wide.step());
        const update = cache.update();
        const expected = buildProxyState(
          { services: [wide.service], endpointSlices: [...wide.slices.values()], node: WIDE_NODE },
          opts,
        );
        const where = `seed ${seed}, step ${step}`;
        assert.deepEqual(plain(update.state), plain(expected.state), where);
        assert.deepEqual([...update.changed].sort(), [...allChanged(prev, expected.state)].sort(), where);
        for (const sp of update.state.IPv4?.servicePorts.values() ?? [])
          if (sp.clusterEndpoints instanceof ChunkedList) chunked++;
        prev = expected.state;
      }
    }
    assert.ok(chunked > 0, 'some lists were chunked');
  });

  it('recomputes everything when the node changes, and says so', () => {
    const cache = new ModelCache(options({ nodeIPs: [] }));
    cache.setService(decoded(service('web', { externalTrafficPolicy: 'Local', type: 'NodePort' })));
    cache.setEndpointSlice(
      decoded(slice('web', [endpoint('10.244.1.1', { zones: ['zone-b'], nodeName: 'node-2' })])),
    );
    cache.setNode(decoded(node(THIS_NODE, { internalIPs: ['192.168.0.1'], zone: 'zone-a' })));
    cache.update();
    cache.setNode(decoded(node(THIS_NODE, { internalIPs: ['192.168.0.2'], zone: 'zone-a' })));
    const moved = cache.update();
    assert.equal(moved.full, true);
    assert.deepEqual(moved.state.IPv4?.node.nodeIPs, ['192.168.0.2']);
  });
});
