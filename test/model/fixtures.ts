// Tiny builders for realistic Kubernetes objects, and a build() that runs them through the same
// path as the CLI and the daemon: decodeObject, then buildProxyState.
import assert from 'node:assert/strict';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { EndpointList, ServicePort } from '../../contract/proxy-state.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type {
  EndpointSlice,
  EndpointSliceEndpoint,
  EndpointSlicePort,
  KubeObject,
  LoadBalancerIngress,
  Node,
  Service,
  ServiceSpec,
} from '../../src/kube/objects.ts';
import { buildProxyState, type ModelOutput, type ProxyOptions } from '../../src/model/build-state.ts';

export const THIS_NODE = 'node-1';

interface Meta {
  readonly namespace?: string;
  readonly labels?: Record<string, string>;
}

/** A ClusterIP service "default/<name>" with cluster IP 10.96.0.10 and one port http 80/TCP, unless overridden. */
export function service(
  name: string,
  spec: ServiceSpec = {},
  extra: Meta & { readonly ingress?: LoadBalancerIngress[]; readonly created?: string } = {},
): Service {
  const clusterIP = spec.clusterIP ?? spec.clusterIPs?.[0] ?? '10.96.0.10';
  return {
    kind: 'Service',
    metadata: {
      name,
      namespace: extra.namespace ?? 'default',
      ...(extra.labels && { labels: extra.labels }),
      // The API's text, as decodeObject reads it (it keeps seconds since the epoch).
      ...(extra.created && { creationTimestamp: extra.created as unknown as number }),
    },
    spec: { type: 'ClusterIP', clusterIP, ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec },
    ...(extra.ingress && { status: { loadBalancer: { ingress: extra.ingress } } }),
  };
}

/** An EndpointSlice of service `serviceName` with port http 8080/TCP unless overridden. */
export function slice(
  serviceName: string,
  endpoints: EndpointSliceEndpoint[],
  extra: Meta & {
    readonly name?: string;
    readonly addressType?: string;
    readonly ports?: EndpointSlicePort[];
  } = {},
): EndpointSlice {
  const firstIP = endpoints[0]?.addresses[0] ?? '';
  return {
    kind: 'EndpointSlice',
    metadata: {
      name: extra.name ?? `${serviceName}-abc12`,
      namespace: extra.namespace ?? 'default',
      labels: { 'kubernetes.io/service-name': serviceName, ...extra.labels },
    },
    addressType: extra.addressType ?? (firstIP.includes(':') ? 'IPv6' : 'IPv4'),
    endpoints,
    ports: extra.ports ?? [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

export interface EndpointExtra {
  readonly ready?: boolean | null;
  readonly serving?: boolean | null;
  readonly terminating?: boolean | null;
  readonly nodeName?: string;
  readonly zones?: string[];
  readonly nodes?: string[];
}

/** A ready endpoint on another node unless told otherwise; conditions left out stay nil. */
export function endpoint(ip: string, extra: EndpointExtra = {}): EndpointSliceEndpoint {
  const conditions: Record<string, boolean | null> = {};
  for (const key of ['ready', 'serving', 'terminating'] as const) {
    if (extra[key] !== undefined) conditions[key] = extra[key];
  }
  return {
    addresses: [ip],
    conditions,
    nodeName: extra.nodeName ?? 'node-2',
    ...((extra.zones || extra.nodes) && {
      hints: {
        ...(extra.zones && { forZones: extra.zones.map((name) => ({ name })) }),
        ...(extra.nodes && { forNodes: extra.nodes.map((name) => ({ name })) }),
      },
    }),
  };
}

export function node(
  name: string,
  extra: { internalIPs?: string[]; externalIPs?: string[]; podCIDRs?: string[]; zone?: string } = {},
): Node {
  return {
    kind: 'Node',
    metadata: { name, ...(extra.zone && { labels: { 'topology.kubernetes.io/zone': extra.zone } }) },
    ...(extra.podCIDRs && { spec: { podCIDR: extra.podCIDRs[0], podCIDRs: extra.podCIDRs } }),
    status: {
      addresses: [
        ...(extra.internalIPs ?? []).map((address) => ({ type: 'InternalIP', address })),
        ...(extra.externalIPs ?? []).map((address) => ({ type: 'ExternalIP', address })),
        { type: 'Hostname', address: name },
      ],
    },
  };
}

/** Options of a single-stack IPv4 node "node-1" (192.168.0.1) with cluster CIDR 10.244.0.0/16. */
export function options(overrides: Partial<ProxyOptions> = {}): ProxyOptions {
  return {
    nodeName: THIS_NODE,
    nodeIPs: ['192.168.0.1'],
    detectLocalMode: 'ClusterCIDR',
    clusterCIDRs: ['10.244.0.0/16'],
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: [],
    ...overrides,
  };
}

/** Decodes every object (as sources and informers do) and builds the state. */
export function build(objects: readonly KubeObject[], overrides: Partial<ProxyOptions> = {}): ModelOutput {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  let thisNode: Node | undefined;
  for (const raw of objects) {
    const decoded = decodeObject(raw);
    assert.equal(decoded.kind, 'object', `fixture does not decode: ${JSON.stringify(decoded)}`);
    if (decoded.kind !== 'object') continue;
    const object = decoded.object;
    if (object.kind === 'Service') services.push(object);
    else if (object.kind === 'EndpointSlice') endpointSlices.push(object);
    else if (object.kind === 'Node') thisNode = object;
  }
  return buildProxyState(
    { services, endpointSlices, ...(thisNode && { node: thisNode }) },
    options(overrides),
  );
}

/** The service port `key` of `family`; fails the test when it is missing. */
export function portOf(output: ModelOutput, key: string, family: IPFamily = 'IPv4'): ServicePort {
  const port = output.state[family]?.servicePorts.get(key);
  assert.ok(
    port,
    `no ${family} service port ${key}; have ${[...(output.state[family]?.servicePorts.keys() ?? [])]}`,
  );
  return port;
}

/** "ip:port" of each endpoint, for compact assertions. */
export function addresses(endpoints: EndpointList): string[] {
  return endpoints.map((ep) => (ep.ip.includes(':') ? `[${ep.ip}]:${ep.port}` : `${ep.ip}:${ep.port}`));
}
