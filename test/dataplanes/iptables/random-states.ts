// Seeded random ProxyStates and random changes between them, for the "partial ≡ full" properties.

import type { Endpoint, ProxyState, ServicePort } from '../../../contract/proxy-state.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

function endpoints(random: () => number, service: number): Endpoint[] {
  const count = Math.floor(random() * 4);
  const chosen = new Map<string, Endpoint>();
  for (let i = 0; i < count; i++) {
    const host = 10 + Math.floor(random() * 4);
    const node = random() < 0.4 ? 1 : 2;
    const ep = endpoint(`10.244.${node}.${host}`, 8000 + service, { isLocal: node === 1 });
    chosen.set(ep.ip, ep);
  }
  return [...chosen.values()].sort((a, b) => (a.ip < b.ip ? -1 : 1));
}

/** One random service port number `i` (0..9), with random features. */
export function randomServicePort(random: () => number, i: number): ServicePort {
  const cluster = endpoints(random, i);
  const local = cluster.filter((e) => e.isLocal);
  const externalPolicyLocal = random() < 0.3;
  const internalPolicyLocal = random() < 0.2;
  const nodePort = random() < 0.5 ? 30000 + i : 0;
  const lb = random() < 0.3;
  return servicePort(`svc${i}`, {
    namespace: 'ns',
    clusterIP: `10.96.0.${10 + i}`,
    protocol: pick(random, ['TCP', 'UDP'] as const),
    nodePort,
    externalIPs: random() < 0.2 ? [`192.0.2.${10 + i}`] : [],
    loadBalancerIPs: lb ? [`198.51.100.${10 + i}`] : [],
    loadBalancerSourceRanges: lb && random() < 0.5 ? ['203.0.113.0/24', '10.100.0.0/16'] : [],
    sessionAffinity: random() < 0.3 ? { timeoutSeconds: 60 + i } : undefined,
    externalPolicyLocal,
    internalPolicyLocal,
    healthCheckNodePort: externalPolicyLocal && lb ? 32000 + i : 0,
    clusterEndpoints: internalPolicyLocal && !(nodePort || lb) ? [] : cluster,
    localEndpoints: internalPolicyLocal || externalPolicyLocal ? local : [],
    hasEndpoints: cluster.length > 0,
  });
}

export function randomState(random: () => number): ProxyState {
  const ports: ServicePort[] = [];
  for (let i = 0; i < 10; i++) if (random() < 0.6) ports.push(randomServicePort(random, i));
  return proxyState('IPv4', ports);
}

/** A few service ports added, removed or re-drawn. */
export function randomChange(random: () => number, state: ProxyState): ProxyState {
  const ports = new Map(state.servicePorts);
  const changes = 1 + Math.floor(random() * 3);
  for (let c = 0; c < changes; c++) {
    const i = Math.floor(random() * 10);
    const existing = [...ports.values()].find((sp) => sp.name === `svc${i}`);
    if (existing && random() < 0.3) ports.delete(existing.key);
    else {
      if (existing) ports.delete(existing.key);
      const sp = randomServicePort(random, i);
      ports.set(sp.key, sp);
    }
  }
  return proxyState('IPv4', [...ports.values()]);
}
