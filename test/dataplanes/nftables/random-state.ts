// Seeded random ProxyStates for the incremental ≡ full properties. Services are drawn from a small
// pool so that two states share most service ports and differ in the ways real updates do.

import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { DualStackState, Endpoint, Protocol, ServicePort } from '../../../contract/proxy-state.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

function addr(family: IPFamily, v4: string, v6: string): string {
  return family === 'IPv4' ? v4 : v6;
}

function randomEndpoints(random: () => number, family: IPFamily): Endpoint[] {
  const count = pick(random, [0, 1, 1, 2, 3, 4]);
  const chosen = new Map<string, Endpoint>();
  for (let i = 0; i < count; i++) {
    const node = 1 + Math.floor(random() * 2);
    const pod = 10 + Math.floor(random() * 4);
    const ip = addr(family, `10.244.${node}.${pod}`, `fd00:244:${node}::${pod}`);
    chosen.set(ip, endpoint(ip, 8080, { isLocal: node === 1 }));
  }
  return [...chosen.values()].sort((a, b) => (a.ip < b.ip ? -1 : 1));
}

function randomServicePort(random: () => number, family: IPFamily, i: number): ServicePort {
  const protocol: Protocol = pick(random, ['TCP', 'TCP', 'UDP', 'SCTP']);
  const clusterEndpoints = randomEndpoints(random, family);
  const external = random() < 0.4;
  const lb = random() < 0.3;
  // Pairs of ports share a cluster IP (on different ports), as a Service's ports do: the
  // cluster-ips element stays while either of them does.
  return servicePort(`svc${i}`, {
    clusterIP: addr(family, `10.96.0.${10 + (i >> 1)}`, `fd00:96::${10 + (i >> 1)}`),
    protocol,
    port: 80 + i,
    nodePort: random() < 0.5 ? 30000 + i : 0,
    externalIPs: external ? [addr(family, `192.168.5.${i}`, `fd00:5::${i}`)] : [],
    loadBalancerIPs: lb ? [addr(family, `192.168.6.${i}`, `fd00:6::${i}`)] : [],
    // Nested ranges, as the API allows: an interval set must get them without overlaps.
    loadBalancerSourceRanges:
      lb && random() < 0.5
        ? [
            addr(family, '10.100.0.0/24', 'fd00:100::/64'),
            addr(family, '10.100.0.128/25', 'fd00:100::/96'),
            addr(family, '10.100.0.0/16', 'fd00:100::/56'),
          ]
        : [],
    externalPolicyLocal: random() < 0.3,
    internalPolicyLocal: random() < 0.2,
    sessionAffinity: random() < 0.2 ? { timeoutSeconds: pick(random, [60, 10800]) } : undefined,
    clusterEndpoints,
    localEndpoints: clusterEndpoints.filter((ep) => ep.isLocal),
    hasEndpoints: clusterEndpoints.length > 0,
  });
}

export function randomState(random: () => number): DualStackState {
  const state = (family: IPFamily) => {
    const ports: ServicePort[] = [];
    for (let i = 0; i < 8; i++) if (random() < 0.6) ports.push(randomServicePort(random, family, i));
    return proxyState(family, ports, {
      masqueradeAll: random() < 0.3,
      nodePortAddresses: random() < 0.5 ? 'all' : [addr(family, '10.100.0.0/24', 'fd00:100::/64')],
      serviceCIDRs: random() < 0.5 ? [] : [addr(family, '10.96.0.0/16', 'fd00:96::/112')],
    });
  };
  const families = pick(random, ['IPv4', 'IPv4', 'both', 'IPv6'] as const);
  return {
    ...(families !== 'IPv6' && { IPv4: state('IPv4') }),
    ...(families !== 'IPv4' && { IPv6: state('IPv6') }),
  };
}
