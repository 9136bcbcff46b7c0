// A synthetic cluster of the shape the kernel baseline measured: N ClusterIP services × E ready
// endpoints, spread over a few nodes, as slim Kubernetes objects. Deterministic for a given size.
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import type { EndpointSlice, Node, Service } from '../src/kube/objects.ts';
import { ENDPOINT_SLICES, SERVICES } from '../src/kube/resources.ts';

export interface SyntheticCluster {
  readonly services: Service[];
  readonly endpointSlices: EndpointSlice[];
  readonly nodes: Node[];
}

export interface SyntheticClusterOptions {
  readonly services: number;
  readonly endpointsPerService: number;
  readonly nodes?: number;
}

const SERVICE_BASE = ipv4ToInt('10.96.0.10');
const POD_BASE = ipv4ToInt('10.244.0.1');
const POD_SPACE = 65534;

function ipv4ToInt(ip: string): number {
  return ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** Endpoint k of the whole cluster gets pod IP 10.244.0.1 + (k mod 65534), as in the baseline. */
export function podIP(k: number): string {
  return intToIpv4(POD_BASE + (k % POD_SPACE));
}

export function serviceName(i: number): string {
  return `svc${i}`;
}

export function serviceNamespace(i: number): string {
  return `ns${Math.floor(i / 1000)}`;
}

export function syntheticService(i: number): Service {
  return {
    kind: 'Service',
    metadata: { name: serviceName(i), namespace: serviceNamespace(i) },
    spec: {
      type: 'ClusterIP',
      clusterIP: intToIpv4(SERVICE_BASE + i),
      clusterIPs: [intToIpv4(SERVICE_BASE + i)],
      ipFamilies: ['IPv4'],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
    },
  };
}

/** The slice of service i; `variant` shifts the first endpoint so a test can toggle one change. */
export function syntheticSlice(i: number, endpoints: number, nodes: number, variant = 0): EndpointSlice {
  return {
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: {
      name: `${serviceName(i)}-abcde`,
      namespace: serviceNamespace(i),
      labels: { 'kubernetes.io/service-name': serviceName(i) },
    },
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: Array.from({ length: endpoints }, (_, j) => ({
      addresses: [podIP(i * endpoints + j + (j === 0 ? variant * 7919 : 0))],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${(i + j) % nodes}`,
    })),
  };
}

export function syntheticNode(n: number): Node {
  return {
    kind: 'Node',
    metadata: { name: `node-${n}`, labels: { 'topology.kubernetes.io/zone': `zone-${n % 3}` } },
    spec: { podCIDR: `10.244.${n}.0/24`, podCIDRs: [`10.244.${n}.0/24`] },
    status: { addresses: [{ type: 'InternalIP', address: `192.168.0.${n + 10}` }] },
  };
}

export function syntheticCluster(options: SyntheticClusterOptions): SyntheticCluster {
  const nodes = options.nodes ?? 3;
  return {
    services: Array.from({ length: options.services }, (_, i) => syntheticService(i)),
    endpointSlices: Array.from({ length: options.services }, (_, i) =>
      syntheticSlice(i, options.endpointsPerService, nodes),
    ),
    nodes: Array.from({ length: nodes }, (_, n) => syntheticNode(n)),
  };
}

/**
 * Writes the cluster as one JSON List (what the stand-in API server loads), object by object,
 * without building it all in memory.
 */
export async function writeClusterList(
  file: string,
  { services, endpointsPerService, nodes = 3 }: SyntheticClusterOptions,
): Promise<void> {
  const out = createWriteStream(file);
  const write = async (text: string) => {
    if (!out.write(text)) await once(out, 'drain');
  };
  await write('{"kind":"List","apiVersion":"v1","items":[\n');
  for (let n = 0; n < nodes; n++)
    await write(`${JSON.stringify({ apiVersion: 'v1', ...syntheticNode(n) })},\n`);
  for (let i = 0; i < services; i++) {
    await write(`${JSON.stringify({ apiVersion: SERVICES.apiVersion, ...syntheticService(i) })},\n`);
    const slice = {
      apiVersion: ENDPOINT_SLICES.apiVersion,
      ...syntheticSlice(i, endpointsPerService, nodes),
    };
    await write(`${JSON.stringify(slice)}${i === services - 1 ? '' : ','}\n`);
  }
  await write(']}\n');
  out.end();
  await once(out, 'finish');
}

/**
 * One Service with `ports` TCP ports and `endpoints` ready endpoints serving all of them, its
 * EndpointSlices at the API's limit of 100 ports each: the largest valid object a user can make.
 */
export function hugeService(
  ports: number,
  endpoints: number,
  portsPerSlice = 100,
  nodes = 3,
): SyntheticCluster {
  const portName = (p: number) => `p${p}`;
  const service: Service = {
    ...syntheticService(0),
    spec: {
      ...syntheticService(0).spec,
      ports: Array.from({ length: ports }, (_, p) => ({
        name: portName(p),
        protocol: 'TCP' as const,
        port: 1000 + p,
        targetPort: 20000 + p,
      })),
    },
  };
  const endpointSlices = Array.from({ length: Math.ceil(ports / portsPerSlice) }, (_, s) => ({
    ...syntheticSlice(0, endpoints, nodes),
    metadata: { ...syntheticSlice(0, 0, nodes).metadata, name: `${serviceName(0)}-${s}` },
    ports: Array.from({ length: Math.min(portsPerSlice, ports - s * portsPerSlice) }, (_, k) => ({
      name: portName(s * portsPerSlice + k),
      protocol: 'TCP' as const,
      port: 20000 + s * portsPerSlice + k,
    })),
  }));
  return {
    services: [service],
    endpointSlices,
    nodes: Array.from({ length: nodes }, (_, n) => syntheticNode(n)),
  };
}

/**
 * The EndpointSlice controller's default --max-endpoints-per-slice: a Service with many endpoints
 * reaches the proxy as many slices of this size.
 */
const ENDPOINTS_PER_SLICE = 100;
/** Pod addresses of the wide service run on past 10.244.255.255 (a /14), so each is its own. */
const WIDE_POD_SPACE = 4 * 65536 - 2;

/**
 * Slice `s` of the one Service of a wide cluster (`endpoints` in all); `variant` moves its first
 * endpoint to an address no other endpoint has, so a test can toggle one change.
 */
export function wideSlice(s: number, endpoints: number, nodes: number, variant = 0): EndpointSlice {
  const first = s * ENDPOINTS_PER_SLICE;
  const count = Math.min(ENDPOINTS_PER_SLICE, endpoints - first);
  if (endpoints + s >= WIDE_POD_SPACE) throw new Error(`a wide service holds < ${WIDE_POD_SPACE} endpoints`);
  const base = syntheticSlice(0, 0, nodes);
  return {
    ...base,
    metadata: { ...base.metadata, name: `${serviceName(0)}-${s}` },
    endpoints: Array.from({ length: count }, (_, j) => ({
      addresses: [intToIpv4(POD_BASE + (j === 0 && variant % 2 === 1 ? endpoints + s : first + j))],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${(first + j) % nodes}`,
    })),
  };
}

/**
 * The changes of one endpoint a cluster makes all day besides a replaced one (issue 33), each a
 * pair of states of the middle service's slice a section toggles between: `there` names the
 * change from `from` to `to`, `back` the change back. Each changes the service's endpoint count.
 */
export interface ChangePair {
  readonly there: string;
  readonly back: string;
  readonly from: EndpointSlice;
  readonly to: EndpointSlice;
}

export function changePairs(shape: ClusterShape, nodes = 3): readonly ChangePair[] {
  if (shape.wide) throw new Error('change pairs are of the N-services shape');
  const middle = Math.floor(shape.services / 2);
  const slice = (endpoints: number) => syntheticSlice(middle, endpoints, nodes);
  const base = slice(shape.endpointsPerService);
  const endpoints = base.endpoints!;
  // An address past every service's (podIP numbers them i * E + j).
  const added: EndpointSlice = {
    ...base,
    endpoints: [
      ...endpoints,
      { ...endpoints[0]!, addresses: [podIP(shape.services * shape.endpointsPerService)] },
    ],
  };
  const terminating: EndpointSlice = {
    ...base,
    endpoints: endpoints.map((endpoint, j) =>
      j === 0 ? { ...endpoint, conditions: { ready: false, serving: true, terminating: true } } : endpoint,
    ),
  };
  return [
    { there: 'Added', back: 'Removed', from: base, to: added },
    { there: 'Terminating', back: 'Ready', from: base, to: terminating },
    { there: 'ScaledTo0', back: 'ScaledTo1', from: slice(1), to: slice(0) },
  ];
}

/** The shape a speed section measures: N services × E endpoints, or one Service with E (wide). */
export interface ClusterShape {
  readonly services: number;
  readonly endpointsPerService: number;
  readonly wide: boolean;
}

export function shapedCluster(shape: ClusterShape, nodes = 3): SyntheticCluster {
  if (!shape.wide) return syntheticCluster({ ...shape, nodes });
  const slices = Math.ceil(shape.endpointsPerService / ENDPOINTS_PER_SLICE);
  return {
    services: [syntheticService(0)],
    endpointSlices: Array.from({ length: slices }, (_, s) => wideSlice(s, shape.endpointsPerService, nodes)),
    nodes: Array.from({ length: nodes }, (_, n) => syntheticNode(n)),
  };
}

/** The same cluster with `sessionAffinity: ClientIP` (kube-proxy's default 3 h) on every Service. */
export function withClientIPAffinity(cluster: SyntheticCluster): SyntheticCluster {
  const sticky = (s: Service): Service => ({
    ...s,
    spec: {
      ...s.spec,
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 10800 } },
    },
  });
  return { ...cluster, services: cluster.services.map(sticky) };
}

/**
 * The slice an endpoint-change benchmark toggles (by `variant`'s parity): the middle service's, or
 * the wide service's middle slice. Every toggle is a real change of one endpoint.
 */
export function changedSlice(shape: ClusterShape, variant: number, nodes = 3): EndpointSlice {
  if (!shape.wide)
    return syntheticSlice(Math.floor(shape.services / 2), shape.endpointsPerService, nodes, variant % 2);
  const middle = Math.floor(Math.ceil(shape.endpointsPerService / ENDPOINTS_PER_SLICE) / 2);
  return wideSlice(middle, shape.endpointsPerService, nodes, variant);
}
