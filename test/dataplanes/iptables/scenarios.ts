// Small hand-built states for the iptables planner's unit, golden and kernel tests. Each scenario
// exercises one feature the way kube-proxy's own iptables fixtures do.

import type { DualStackState } from '../../../contract/proxy-state.ts';
import { endpoint, localEndpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';

const local = localEndpoint('10.244.1.10', 8080);
const remote = endpoint('10.244.2.10', 8080);
const remote2 = endpoint('10.244.2.11', 8080);

/** Named scenarios; each is rendered to test/golden/iptables/NAME.rules. */
export const SCENARIOS: Readonly<Record<string, DualStackState>> = {
  'cluster-ip': {
    IPv4: proxyState('IPv4', [
      servicePort('web', {
        namespace: 'ns1',
        clusterIP: '10.96.0.10',
        clusterEndpoints: [local, remote, remote2],
      }),
      servicePort('dns', {
        namespace: 'kube-system',
        clusterIP: '10.96.0.53',
        port: 53,
        protocol: 'UDP',
        clusterEndpoints: [endpoint('10.244.2.53', 53)],
      }),
    ]),
  },
  'node-port': {
    IPv4: proxyState('IPv4', [
      servicePort('np', {
        namespace: 'ns1',
        clusterIP: '10.96.0.20',
        nodePort: 30080,
        clusterEndpoints: [local, remote],
      }),
    ]),
  },
  'external-traffic-local': {
    IPv4: proxyState('IPv4', [
      servicePort('etp', {
        namespace: 'ns1',
        clusterIP: '10.96.0.30',
        nodePort: 30081,
        loadBalancerIPs: ['192.0.2.30'],
        externalPolicyLocal: true,
        healthCheckNodePort: 31000,
        clusterEndpoints: [local, remote],
        localEndpoints: [local],
      }),
      servicePort('etp-none-here', {
        namespace: 'ns1',
        clusterIP: '10.96.0.31',
        nodePort: 30082,
        externalPolicyLocal: true,
        clusterEndpoints: [remote],
      }),
    ]),
  },
  // Both have endpoints elsewhere in the cluster: Local traffic sees only this node's.
  'internal-traffic-local': {
    IPv4: proxyState('IPv4', [
      servicePort('itp', {
        namespace: 'ns1',
        clusterIP: '10.96.0.40',
        internalPolicyLocal: true,
        localEndpoints: [local],
        hasEndpoints: true,
      }),
      servicePort('itp-none-here', {
        namespace: 'ns1',
        clusterIP: '10.96.0.41',
        internalPolicyLocal: true,
        hasEndpoints: true,
      }),
    ]),
  },
  'load-balancer': {
    IPv4: proxyState('IPv4', [
      servicePort('lb', {
        namespace: 'ns1',
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
    IPv4: proxyState('IPv4', [
      servicePort('sticky', {
        namespace: 'ns1',
        clusterIP: '10.96.0.60',
        sessionAffinity: { timeoutSeconds: 10800 },
        clusterEndpoints: [remote, remote2],
      }),
    ]),
  },
  'no-endpoints': {
    IPv4: proxyState('IPv4', [
      servicePort('empty', {
        namespace: 'ns1',
        clusterIP: '10.96.0.70',
        nodePort: 30070,
        externalIPs: ['192.0.2.70'],
        loadBalancerIPs: ['192.0.2.71'],
        hasEndpoints: false,
      }),
    ]),
  },
  'masquerade-all-and-node-port-addresses': {
    IPv4: proxyState(
      'IPv4',
      [
        servicePort('web', {
          namespace: 'ns1',
          clusterIP: '10.96.0.80',
          nodePort: 30080,
          clusterEndpoints: [remote],
        }),
      ],
      { masqueradeAll: true, nodePortAddresses: ['10.100.0.0/16'], localDetector: { mode: 'None' } },
    ),
  },
  // kube-proxy's default in iptables mode: node ports on 127.0.0.1 too (IPv4), guarded by the
  // localnet firewall, their packets counted in its nfacct object; IPv6 still excludes ::1.
  'localhost-node-ports': {
    IPv4: proxyState(
      'IPv4',
      [
        servicePort('np', {
          namespace: 'ns1',
          clusterIP: '10.96.0.20',
          nodePort: 30080,
          clusterEndpoints: [remote],
        }),
      ],
      { localhostNodePorts: true, localhostNodePortsCounted: true },
    ),
    IPv6: proxyState('IPv6', [
      servicePort('np', {
        namespace: 'ns1',
        clusterIP: 'fd00:96::20',
        nodePort: 30080,
        clusterEndpoints: [endpoint('fd00:244:2::10', 8080)],
      }),
    ]),
  },
  // --nodeport-addresses primary,localhost: the node IP and lo's 127.0.0.1, one jump each; a
  // kernel without nfacct, so no counting rule.
  'localhost-node-port-addresses': {
    IPv4: proxyState(
      'IPv4',
      [
        servicePort('np', {
          namespace: 'ns1',
          clusterIP: '10.96.0.20',
          nodePort: 30080,
          clusterEndpoints: [remote],
        }),
      ],
      { nodePortAddresses: ['10.100.0.11/32', '127.0.0.0/8'], localhostNodePorts: true },
    ),
  },
  'interface-prefix-detector': {
    IPv4: proxyState(
      'IPv4',
      [
        servicePort('etp', {
          namespace: 'ns1',
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
    IPv4: proxyState('IPv4', [
      servicePort('web', {
        namespace: 'ns1',
        clusterIP: '10.96.0.10',
        nodePort: 30080,
        clusterEndpoints: [local, remote],
      }),
    ]),
    IPv6: proxyState('IPv6', [
      servicePort('web', {
        namespace: 'ns1',
        clusterIP: 'fd00:96::10',
        nodePort: 30080,
        clusterEndpoints: [localEndpoint('fd00:244:1::10', 8080), endpoint('fd00:244:2::10', 8080)],
      }),
    ]),
  },
};
