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
