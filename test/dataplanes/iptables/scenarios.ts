// Small hand-built states for the iptables planner's unit, golden and kernel tests. Each scenario
// exercises one feature the way kube-proxy's own iptables fixtures do.
import type {
  DualStackState,
  Endpoint,
  IPFamily,
  NodeSettings,
  ProxyState,
  ServicePort,
} from '../../../src/model/proxy-state.ts';
import { port } from '../../sync/state-fixtures.ts';

export function endpoint(ip: string, portNumber: number, isLocal = false): Endpoint {
  return { ip, port: portNumber, isLocal, ready: true, serving: true, terminating: false };
}

/** A service port keyed like the model does, "namespace/name:port/PROTOCOL". */
export function servicePort(
  namespace: string,
  name: string,
  overrides: Partial<ServicePort> & Pick<ServicePort, 'clusterIP'>,
): ServicePort {
  const protocol = overrides.protocol ?? 'TCP';
  const portNumber = overrides.port ?? 80;
  return port(`${namespace}/${name}:${portNumber}/${protocol}`, { namespace, name, ...overrides });
}

export const NODE_V4: NodeSettings = {
  nodeName: 'node-1',
  nodeIPs: ['10.100.0.11'],
  localDetector: { mode: 'ClusterCIDR', cidrs: ['10.244.0.0/16'] },
  masqueradeAll: false,
  masqueradeBit: 14,
  nodePortAddresses: 'all',
};

export const NODE_V6: NodeSettings = {
  ...NODE_V4,
  nodeIPs: ['fd00:100::11'],
  localDetector: { mode: 'ClusterCIDR', cidrs: ['fd00:244::/32'] },
};

export function familyState(
  family: IPFamily,
  ports: readonly ServicePort[],
  node?: Partial<NodeSettings>,
): ProxyState {
  const base = family === 'IPv4' ? NODE_V4 : NODE_V6;
  const sorted = [...ports].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { family, node: { ...base, ...node }, servicePorts: new Map(sorted.map((sp) => [sp.key, sp])) };
}

const local = endpoint('10.244.1.10', 8080, true);
const remote = endpoint('10.244.2.10', 8080);
const remote2 = endpoint('10.244.2.11', 8080);

/** Named scenarios; each is rendered to test/golden/iptables/NAME.rules. */
export const SCENARIOS: Readonly<Record<string, DualStackState>> = {
  'cluster-ip': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'web', {
        clusterIP: '10.96.0.10',
        clusterEndpoints: [local, remote, remote2],
      }),
      servicePort('kube-system', 'dns', {
        clusterIP: '10.96.0.53',
        port: 53,
        protocol: 'UDP',
        clusterEndpoints: [endpoint('10.244.2.53', 53)],
      }),
    ]),
  },
  'node-port': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'np', {
        clusterIP: '10.96.0.20',
        nodePort: 30080,
        clusterEndpoints: [local, remote],
      }),
    ]),
  },
  'external-traffic-local': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'etp', {
        clusterIP: '10.96.0.30',
        nodePort: 30081,
        loadBalancerIPs: ['192.0.2.30'],
        externalPolicyLocal: true,
        healthCheckNodePort: 31000,
        clusterEndpoints: [local, remote],
        localEndpoints: [local],
      }),
      servicePort('ns1', 'etp-none-here', {
        clusterIP: '10.96.0.31',
        nodePort: 30082,
        externalPolicyLocal: true,
        clusterEndpoints: [remote],
      }),
    ]),
  },
  'internal-traffic-local': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'itp', {
        clusterIP: '10.96.0.40',
        internalPolicyLocal: true,
        localEndpoints: [local],
      }),
      servicePort('ns1', 'itp-none-here', { clusterIP: '10.96.0.41', internalPolicyLocal: true }),
    ]),
  },
  'load-balancer': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'lb', {
        clusterIP: '10.96.0.50',
        nodePort: 30090,
        externalIPs: ['192.0.2.50'],
        loadBalancerIPs: ['192.0.2.51'],
        loadBalancerSourceRanges: ['198.51.100.0/24', '10.100.0.0/16'],
        clusterEndpoints: [remote],
      }),
    ]),
  },
  'session-affinity': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'sticky', {
        clusterIP: '10.96.0.60',
        sessionAffinity: { timeoutSeconds: 10800 },
        clusterEndpoints: [remote, remote2],
      }),
    ]),
  },
  'no-endpoints': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'empty', {
        clusterIP: '10.96.0.70',
        nodePort: 30070,
        externalIPs: ['192.0.2.70'],
        loadBalancerIPs: ['192.0.2.71'],
        hasEndpoints: false,
      }),
    ]),
  },
  'masquerade-all-and-node-port-addresses': {
    IPv4: familyState(
      'IPv4',
      [servicePort('ns1', 'web', { clusterIP: '10.96.0.80', nodePort: 30080, clusterEndpoints: [remote] })],
      { masqueradeAll: true, nodePortAddresses: ['10.100.0.0/16'], localDetector: { mode: 'None' } },
    ),
  },
  'interface-prefix-detector': {
    IPv4: familyState(
      'IPv4',
      [
        servicePort('ns1', 'etp', {
          clusterIP: '10.96.0.90',
          nodePort: 30091,
          externalPolicyLocal: true,
          clusterEndpoints: [local],
          localEndpoints: [local],
        }),
      ],
      { localDetector: { mode: 'InterfaceNamePrefix', prefixes: ['veth', 'cali'] } },
    ),
  },
  'dual-stack': {
    IPv4: familyState('IPv4', [
      servicePort('ns1', 'web', {
        clusterIP: '10.96.0.10',
        nodePort: 30080,
        clusterEndpoints: [local, remote],
      }),
    ]),
    IPv6: familyState('IPv6', [
      servicePort('ns1', 'web', {
        clusterIP: 'fd00:96::10',
        nodePort: 30080,
        clusterEndpoints: [endpoint('fd00:244:1::10', 8080, true), endpoint('fd00:244:2::10', 8080)],
      }),
    ]),
  },
};
