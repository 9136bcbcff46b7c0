// The random half of trace-prediction.vmtest.ts, apart from the VM so that the host can sweep it
// (random-flows.test.ts): a seed's cluster of the VM node's pods and its flows from outside, a pod
// and the node. Which outcomes the flows meet follows from the seed and the tracer alone; the VM
// checks that packets meet them.

import type { DualStackState } from '../../../../contract/proxy-state.ts';
import type { TracePacket } from '../../../../dataplanes/shared/trace/packet.ts';
import { localEndpoint, proxyState, servicePort } from '../../../../harness/proxy-states.ts';

export const NODE_IP = '10.101.0.11';
export const CLIENT_IP = '10.101.0.200';
export const GATEWAY = '10.245.1.1';
export const POD_IPS = ['10.245.1.10', '10.245.1.11', '10.245.1.12'];
export const LB_PREFIX = '192.168.8';
const SERVICES = 6;
export const UNSERVED_PORT = 81;
/** Flows a run sends. */
export const FLOWS = 300;
/** What the tracer is told of the node: its addresses. */
export const NODE_HOST = { localAddresses: [NODE_IP, GATEWAY] };

/** A random cluster of this node's pods: node ports, LB IPs with source ranges, eTP/iTP Local, affinity, none. */
export function randomState(random: () => number): DualStackState {
  const ports = Array.from({ length: SERVICES }, (_, i) => {
    // svc-0 has none: every run meets the no-endpoint REJECT, from each origin. svc-1 and svc-2
    // keep pod-0, so that every origin meets a DNAT: drawn freely, all five were empty for 1 in 8^5
    // (~3e-5) of seeds, and one kept service alone left ~1e-6 of runs without an origin's DNAT.
    const endpoints = POD_IPS.filter((_, m) => (random() < 0.5 || (m === 0 && i <= 2)) && i > 0).map((ip) =>
      localEndpoint(ip, 8080),
    );
    const loadBalancer = random() < 0.5;
    const nodePort = loadBalancer || random() < 0.5 ? 30200 + i : 0;
    return servicePort(`svc-${i}`, {
      clusterIP: `10.96.2.${10 + i}`,
      nodePort,
      loadBalancerIPs: loadBalancer ? [`${LB_PREFIX}.${10 + i}`] : [],
      loadBalancerSourceRanges: loadBalancer && random() < 0.4 ? [`${CLIENT_IP}/32`] : [],
      externalPolicyLocal: nodePort > 0 && random() < 0.4,
      internalPolicyLocal: random() < 0.2,
      ...(random() < 0.2 && { sessionAffinity: { timeoutSeconds: 600 } }),
      clusterEndpoints: endpoints,
      localEndpoints: endpoints,
    });
  });
  return {
    IPv4: proxyState('IPv4', ports, {
      nodeIPs: [NODE_IP],
      localDetector: { mode: 'ClusterCIDR', cidrs: ['10.245.0.0/16'] },
    }),
  };
}
export interface RandomFlow {
  readonly n: number;
  readonly from: 'client' | 'pod' | 'node';
  readonly packet: TracePacket;
  readonly service: string;
}

/** `count` flows to the state's service addresses and a ClusterIP's unserved port, from each origin. */
export function randomFlows(random: () => number, state: DualStackState, count: number): RandomFlow[] {
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const services = [...state.IPv4!.servicePorts.values()];
  return Array.from({ length: count }, (_, n) => {
    const sp = pick(services);
    const [destination, port] = pick<[string, number]>([
      [sp.clusterIP, 80],
      [sp.clusterIP, 80],
      ...(sp.nodePort ? [[NODE_IP, sp.nodePort] as [string, number]] : []),
      ...sp.loadBalancerIPs.map((ip) => [ip, 80] as [string, number]),
      [sp.clusterIP, UNSERVED_PORT],
    ]);
    const from = pick(['client', 'pod', 'node'] as const);
    // The node's connection to an address bound on the dummy link leaves from that address.
    const nodeSource = destination === NODE_IP ? NODE_IP : destination;
    const source = from === 'client' ? CLIENT_IP : from === 'pod' ? POD_IPS[0]! : nodeSource;
    const via = from === 'client' ? 'external' : from;
    const packet: TracePacket = { source, sourcePort: 40000, destination, port, protocol: 'tcp', via };
    return { n, from, packet, service: sp.name };
  });
}

/**
 * The outcomes every run's flows must meet, by origin, of those they met (`${via} ${kind}`): an
 * unserved port of a ClusterIP and svc-0 are rejected, svc-1 and svc-2 DNAT, from each origin.
 */
export function unmetOutcomes(met: ReadonlyMap<string, number>): string[] {
  return ['external', 'pod', 'node'].flatMap((via) =>
    ['dnat', 'reject'].map((kind) => `${via} ${kind}`).filter((outcome) => !met.has(outcome)),
  );
}
