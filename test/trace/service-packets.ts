// New connections to every address and port of some states' services, from a pod, the node and
// outside, and the host they are traced on: what the live-syncs-trace tests follow through a
// fake kernel's state and through the full render of the same state.

import type { DualStackState } from '../../contract/proxy-state.ts';
import type { TraceHost, TracePacket, TraceProtocol } from '../../dataplanes/shared/trace/packet.ts';

export function servicePackets(states: readonly DualStackState[]): TracePacket[] {
  const packets = new Map<string, TracePacket>();
  for (const state of states) {
    for (const family of [state.IPv4, state.IPv6]) {
      if (!family) continue;
      const v4 = family.family === 'IPv4';
      const nodeIP = family.node.nodeIPs[0]!;
      const sources = [
        { source: v4 ? '10.244.1.10' : 'fd00:244:1::10', via: 'pod' as const },
        { source: nodeIP, via: 'node' as const },
        { source: v4 ? '10.100.0.50' : 'fd00:100::50', via: 'external' as const },
        { source: v4 ? '203.0.113.9' : '2001:db8::9', via: 'external' as const },
      ];
      for (const sp of family.servicePorts.values()) {
        const protocol = sp.protocol.toLowerCase() as TraceProtocol;
        const destinations = [
          ...[sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs]
            .filter(Boolean)
            .map((a) => [a, sp.port]),
          ...(sp.nodePort ? [[nodeIP, sp.nodePort]] : []),
        ] as [string, number][];
        for (const [destination, port] of destinations)
          for (const { source, via } of sources) {
            const packet = { source, sourcePort: 40000, destination, port, protocol, via };
            packets.set(JSON.stringify(packet), packet);
          }
      }
    }
  }
  return [...packets.values()];
}

/** The node of `state`: its first address per family. */
export function nodeHost(state: DualStackState): TraceHost {
  return {
    localAddresses: [state.IPv4?.node.nodeIPs[0], state.IPv6?.node.nodeIPs[0]].flatMap((a) => a ?? []),
  };
}
