// Hand-built states whose full scripts are kept as golden files (and loaded by the kernel test).
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { endpoint, ipv4, localEndpoint, proxyState, servicePort } from './fixtures.ts';

const pods = [endpoint('10.244.2.10'), localEndpoint('10.244.1.10'), localEndpoint('10.244.1.11')];

export const goldenStates: Record<string, DualStackState> = {
  'cluster-ip': ipv4(
    [
      servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: pods }),
      servicePort('dns', {
        clusterIP: '10.96.0.53',
        protocol: 'UDP',
        port: 53,
        clusterEndpoints: [pods[0]!],
      }),
      servicePort('empty', { clusterIP: '10.96.0.99' }),
    ],
    { serviceCIDRs: ['10.96.0.0/16'] },
  ),
  'external-traffic': ipv4(
    [
      servicePort('lb', {
        clusterIP: '10.96.0.20',
        nodePort: 30020,
        loadBalancerIPs: ['192.168.6.6'],
        loadBalancerSourceRanges: ['10.100.0.0/24'],
        externalPolicyLocal: true,
        healthCheckNodePort: 31000,
        clusterEndpoints: pods,
      }),
      servicePort('ext', {
        clusterIP: '10.96.0.21',
        nodePort: 30021,
        externalIPs: ['192.168.5.5'],
        clusterEndpoints: pods,
      }),
      servicePort('quiet', {
        clusterIP: '10.96.0.22',
        nodePort: 30022,
        externalPolicyLocal: true,
        internalPolicyLocal: true,
        clusterEndpoints: [pods[0]!],
      }),
    ],
    { nodePortAddresses: ['10.100.0.0/24'], localDetector: { mode: 'InterfaceNamePrefix', prefixes: ['p'] } },
  ),
  'affinity-dual-stack': {
    IPv4: proxyState('IPv4', [
      servicePort('sticky', {
        clusterIP: '10.96.0.30',
        clusterEndpoints: pods,
        sessionAffinity: { timeoutSeconds: 600 },
      }),
    ]),
    IPv6: proxyState(
      'IPv6',
      [
        servicePort('web', {
          clusterIP: 'fd00:96::10',
          nodePort: 30010,
          clusterEndpoints: [endpoint('fd00:244:2::10'), localEndpoint('fd00:244:1::10')],
        }),
      ],
      { serviceCIDRs: ['fd00:96::/112'] },
    ),
  },
  // ipvs.scheduler sh: the endpoint index is a jhash of the client address (scheduler.ts).
  'source-hash-dual-stack': {
    IPv4: proxyState(
      'IPv4',
      [
        servicePort('web', { clusterIP: '10.96.0.40', nodePort: 30040, clusterEndpoints: pods }),
        servicePort('local', {
          clusterIP: '10.96.0.41',
          nodePort: 30041,
          externalPolicyLocal: true,
          clusterEndpoints: pods,
        }),
      ],
      { endpointHash: 'source' },
    ),
    IPv6: proxyState(
      'IPv6',
      [
        servicePort('web', {
          clusterIP: 'fd00:96::40',
          clusterEndpoints: [endpoint('fd00:244:2::10'), localEndpoint('fd00:244:1::10')],
        }),
      ],
      { endpointHash: 'source' },
    ),
  },
  // ipvs.scheduler mh: the client address hashed into the key's Maglev slots (maglev.ts).
  'consistent-hash': ipv4(
    [
      servicePort('web', { clusterIP: '10.96.0.50', clusterEndpoints: pods }),
      servicePort('dns', {
        clusterIP: '10.96.0.53',
        protocol: 'UDP',
        port: 53,
        clusterEndpoints: [pods[0]!],
      }),
    ],
    { endpointHash: 'consistent' },
  ),
};
