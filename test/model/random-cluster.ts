// Seeded random cluster objects, as the API server (or a careless file) could hold them, made to
// collide: Services draw their cluster IPs, external IPs, LoadBalancer IPs and node ports from one
// small pool, spell addresses in non-canonical ways, carry fields kproxy does not know, and now and
// then a value decode rejects. For the properties that no cluster data stops a planner.
import { decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, Service } from '../../src/kube/objects.ts';
import type { ProxyOptions } from '../../src/model/node-settings.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Random = () => number;

export const CLUSTER_OPTIONS: ProxyOptions = {
  nodeName: 'node-1',
  nodeIPs: ['192.168.10.11', 'fd00:192:168:10::11'],
  detectLocalMode: 'ClusterCIDR',
  clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
  masqueradeAll: false,
  masqueradeBit: 14,
  nodePortAddresses: [],
};

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const chance = (random: Random, p: number): boolean => random() < p;

/** The shared pool, each address in several spellings that all mean it. */
const V4 = [
  ['10.96.0.1', '010.96.0.1', '10.96.0.01', '10.096.000.001'],
  ['10.96.0.2', '10.96.00.2'],
  ['10.96.0.3'],
  ['203.0.113.7', '203.0.113.07'],
];
const V6 = [
  ['fd00:96::1', 'FD00:96::1', 'fd00:96:0:0:0:0:0:1', 'fd00:0096::0001'],
  ['fd00:96::2'],
  ['2001:db8::7', '2001:DB8:0::7'],
];
const NAMES = ['a', 'b', 'c', 'd', 'e', 'f'];
const NAMESPACES = ['default', 'kube-system'];
const CREATED = ['2024-05-01T10:00:00Z', '2025-01-01T00:00:00Z', '2025-01-01T01:00:00+01:00'];
const PORTS: readonly [number, string][] = [
  [80, 'TCP'],
  [80, 'UDP'],
  [443, 'TCP'],
  [53, 'UDP'],
  [53, 'SCTP'],
];
const NODE_PORTS = [30000, 30001, 30002];

const v4 = (random: Random) => pick(random, pick(random, V4));
const v6 = (random: Random) => pick(random, pick(random, V6));
const anyIP = (random: Random) => (chance(random, 0.7) ? v4(random) : v6(random));

/** Fields no version of the API has: decode must drop them, wherever they are. */
function junk(random: Random): Record<string, Json> {
  if (!chance(random, 0.3)) return {};
  return pick<Record<string, Json>>(random, [
    { 'x-unknown': { nested: [1, 'two', null] } },
    { annotationsExtra: 'kproxy ignores this' },
    { zz: [] },
  ]);
}

function randomClusterIPs(random: Random): string[] {
  switch (Math.floor(random() * 6)) {
    case 0:
      return ['None'];
    case 1:
      return [v6(random)];
    case 2:
      return [v4(random), v6(random)];
    default:
      return [v4(random)];
  }
}

function randomService(random: Random, namespace: string, name: string): Json {
  const type = pick(random, ['ClusterIP', 'ClusterIP', 'NodePort', 'LoadBalancer', 'LoadBalancer']);
  const clusterIPs = randomClusterIPs(random);
  const count = 1 + Math.floor(random() * 3);
  const chosen = new Map<string, [number, string]>();
  for (let i = 0; i < count; i++) {
    const [port, protocol] = pick(random, PORTS);
    chosen.set(`${port}/${protocol}`, [port, protocol]);
  }
  const ports = [...chosen.values()].map(([port, protocol], i) => ({
    name: `p${i}`,
    port,
    protocol,
    ...(type !== 'ClusterIP' && { nodePort: pick(random, NODE_PORTS) }),
    ...junk(random),
  }));
  const created = chance(random, 0.8) ? pick(random, CREATED) : undefined;
  const ingress = Array.from({ length: Math.floor(random() * 3) }, () => ({
    ip: anyIP(random),
    ...(chance(random, 0.2) && { ipMode: pick(random, ['VIP', 'Proxy']) }),
  }));
  const service: { [key: string]: Json } = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace,
      resourceVersion: String(Math.floor(random() * 1000)),
      ...(created && { creationTimestamp: created }),
      ...junk(random),
    },
    spec: {
      type,
      clusterIP: clusterIPs[0]!,
      clusterIPs,
      ports,
      ...(chance(random, 0.4) && { externalIPs: [anyIP(random), anyIP(random)] }),
      ...(chance(random, 0.3) && { externalTrafficPolicy: 'Local' }),
      ...(chance(random, 0.2) && { internalTrafficPolicy: 'Local' }),
      ...(chance(random, 0.2) && {
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: pick(random, [1, 10800, 86400]) } },
      }),
      // A range holding the node's IP lets the LoadBalancer IPs in as sources too.
      ...(type === 'LoadBalancer' &&
        chance(random, 0.3) && {
          loadBalancerSourceRanges: pick(random, [
            // Nested ranges, as the API allows: an interval set must get them without overlaps.
            ['192.0.2.0/24', '192.0.2.128/25'],
            ['192.168.10.0/24', 'fd00:192:168:10::/64', '192.168.0.0/16'],
          ]),
        }),
      ...(type === 'LoadBalancer' &&
        chance(random, 0.3) && { healthCheckNodePort: 32000 + Math.floor(random() * 2) }),
      ...junk(random),
    },
    ...(type === 'LoadBalancer' && { status: { loadBalancer: { ingress } } }),
  };
  // Now and then a value decode rejects: that Service is a Problem, and the rest goes on.
  if (chance(random, 0.05)) (service.spec as { [key: string]: Json }).clusterIP = '10.96.0.300';
  return service;
}

function randomSlice(random: Random, namespace: string, name: string, family: 'IPv4' | 'IPv6'): Json {
  // Pod IPs, now and then one that is also a Service address or the node's own IP.
  const podIP = (i: number) => {
    if (chance(random, 0.1))
      return family === 'IPv4' ? pick(random, ['192.168.10.11', v4(random)]) : v6(random);
    return family === 'IPv4' ? `10.244.${1 + (i % 2)}.${10 + i}` : `fd00:10:244:${1 + (i % 2)}::${10 + i}`;
  };
  const endpoints = Array.from({ length: Math.floor(random() * 4) }, (_, i) => ({
    addresses: [podIP(i)],
    conditions: {
      ready: chance(random, 0.7),
      ...(chance(random, 0.2) && { terminating: true, serving: true }),
    },
    nodeName: pick(random, ['node-1', 'node-2']),
    ...junk(random),
  }));
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${name}-${family === 'IPv4' ? 'v4' : 'v6'}`,
      namespace,
      labels: { 'kubernetes.io/service-name': name },
    },
    addressType: family,
    endpoints,
    ports: [0, 1, 2].map((i) => ({
      name: `p${i}`,
      port: 8080 + i,
      protocol: pick(random, ['TCP', 'UDP', 'SCTP']),
    })),
  };
}

export interface RandomCluster {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  /** Objects decode rejected (each is a Problem there). */
  readonly rejected: number;
}

/** The decoded objects of one random cluster. */
export function randomCluster(random: Random): RandomCluster {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  let rejected = 0;
  for (const namespace of NAMESPACES) {
    for (const name of NAMES) {
      if (!chance(random, 0.6)) continue;
      const raws = [randomService(random, namespace, name)];
      if (chance(random, 0.8)) raws.push(randomSlice(random, namespace, name, 'IPv4'));
      if (chance(random, 0.4)) raws.push(randomSlice(random, namespace, name, 'IPv6'));
      for (const raw of raws) {
        const decoded = decodeObject(raw);
        if (decoded.kind !== 'object') rejected++;
        else if (decoded.object.kind === 'Service') services.push(decoded.object);
        else if (decoded.object.kind === 'EndpointSlice') endpointSlices.push(decoded.object);
      }
    }
  }
  return { services, endpointSlices, rejected };
}
