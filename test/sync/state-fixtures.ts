// Small hand-built ProxyStates for the sync and daemon tests: only the fields a test cares about
// are given, the rest are neutral defaults.
import type { Endpoint, IPFamily, ProxyState, ServicePort } from '../../src/model/proxy-state.ts';

export const LOCAL: Endpoint = {
  ip: '10.1.0.5',
  port: 80,
  isLocal: true,
  ready: true,
  serving: true,
  terminating: false,
};

export function port(key: string, overrides: Partial<ServicePort>): ServicePort {
  return {
    key,
    namespace: 'default',
    name: key,
    portName: '',
    protocol: 'TCP',
    port: 80,
    clusterIP: '10.96.0.1',
    nodePort: 0,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
    clusterEndpoints: [],
    localEndpoints: [],
    hasEndpoints: true,
    ...overrides,
  };
}

export function familyState(family: IPFamily, ports: ServicePort[]): ProxyState {
  return {
    family,
    node: {
      nodeName: 'node-1',
      nodeIPs: [],
      localDetector: { mode: 'None' },
      masqueradeAll: false,
      masqueradeBit: 14,
      nodePortAddresses: 'all',
    },
    servicePorts: new Map(ports.map((p) => [p.key, p])),
  };
}
