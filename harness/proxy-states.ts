// Small hand-built ProxyStates for the dataplane, sync and daemon tests: a test names only the
// fields it cares about, the rest are neutral defaults, and the derived fields (key,
// localEndpoints, hasEndpoints) default to what the given endpoints and policies imply.

import type { IPFamily } from '../contract/base/ip-family.ts';
import type {
  DualStackState,
  Endpoint,
  NodeSettings,
  ProxyState,
  ServicePort,
} from '../contract/proxy-state.ts';

export function endpoint(ip: string, port = 8080, options: Partial<Endpoint> = {}): Endpoint {
  return { ip, port, isLocal: false, ready: true, serving: true, terminating: false, ...options };
}

export function localEndpoint(ip: string, port = 8080): Endpoint {
  return endpoint(ip, port, { isLocal: true });
}

/** A ClusterIP service port keyed like the model does, "namespace/name:port/PROTOCOL". */
export function servicePort(name: string, overrides: Partial<ServicePort>): ServicePort {
  const namespace = overrides.namespace ?? 'default';
  const protocol = overrides.protocol ?? 'TCP';
  const port = overrides.port ?? 80;
  const clusterEndpoints = overrides.clusterEndpoints ?? [];
  // The model fills the Local list only when some traffic uses the Local policy.
  const usesLocal = overrides.externalPolicyLocal === true || overrides.internalPolicyLocal === true;
  return {
    key: `${namespace}/${name}:${port}/${protocol}`,
    namespace,
    name,
    portName: '',
    protocol,
    port,
    clusterIP: '10.96.0.1',
    nodePort: 0,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
    localEndpoints: usesLocal ? clusterEndpoints.filter((ep) => ep.isLocal) : [],
    hasEndpoints: clusterEndpoints.length > 0,
    ...overrides,
    clusterEndpoints,
  };
}

export function nodeSettings(family: IPFamily, overrides: Partial<NodeSettings> = {}): NodeSettings {
  const v4 = family === 'IPv4';
  return {
    nodeName: 'node-0',
    nodeIPs: [v4 ? '10.100.0.11' : 'fd00:100::11'],
    localDetector: { mode: 'ClusterCIDR', cidrs: [v4 ? '10.244.0.0/16' : 'fd00:244::/32'] },
    masqueradeAll: false,
    masqueradeBit: 14,
    nodePortAddresses: 'all',
    serviceCIDRs: [],
    ...overrides,
  };
}

/** One family's state, service ports in key order (as the model builds them). */
export function proxyState(
  family: IPFamily,
  ports: readonly ServicePort[],
  node: Partial<NodeSettings> = {},
): ProxyState {
  const sorted = [...ports].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return {
    family,
    node: nodeSettings(family, node),
    servicePorts: new Map(sorted.map((sp) => [sp.key, sp])),
  };
}

export function ipv4(ports: readonly ServicePort[], node: Partial<NodeSettings> = {}): DualStackState {
  return { IPv4: proxyState('IPv4', ports, node) };
}
