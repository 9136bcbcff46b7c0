// Which other owners' rules change a Service's packets: every address of every Service port
// (ClusterIP, external, LoadBalancer) traced from outside the node and from the node itself, with
// the other owners' rules evaluated too; a path that ends in a DROP or REJECT at one of their rules
// names that rule. Mode-neutral: each mode gives its tracer and says which steps are not its own.
import { Slicer } from '../../../contract/base/work-slices.ts';
import type { ServicePort } from '../../../contract/proxy-state.ts';
import type { TraceReport, TraceStep } from '../trace/outcome.ts';
import type { TracePacket, TraceProtocol, TraceVia } from '../trace/packet.ts';

/** A source no Service address or pod network uses (RFC 5737 / RFC 3849 documentation ranges). */
const PROBE_SOURCE = { IPv4: '192.0.2.1', IPv6: '2001:db8::1' } as const;
const PROBE_VIAS: readonly TraceVia[] = ['external', 'node'];

/**
 * The Service ports each foreign rule drops or rejects, keyed by `stepKey` of its step. Traced in
 * slices: at 30,000 Services that is 60,000 traces (about a minute), which the daemon's event loop
 * must not wait out (/healthz, informer events).
 */
export async function foreignHits(
  servicePorts: readonly ServicePort[],
  localAddresses: readonly string[],
  trace: (packet: TracePacket) => TraceReport,
  isForeign: (step: TraceStep) => boolean,
  stepKey: (step: TraceStep) => string,
): Promise<Map<string, Set<string>>> {
  const hits = new Map<string, Set<string>>();
  const slicer = new Slicer();
  for (const sp of servicePorts) {
    await slicer.pause();
    for (const destination of [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].filter(Boolean))
      for (const via of PROBE_VIAS) {
        const v6 = destination.includes(':');
        const ownAddress = localAddresses.find((address) => address.includes(':') === v6);
        const report = trace({
          source: via === 'node' && ownAddress ? ownAddress : PROBE_SOURCE[v6 ? 'IPv6' : 'IPv4'],
          sourcePort: 40000,
          destination,
          port: sp.port,
          protocol: sp.protocol.toLowerCase() as TraceProtocol,
          via,
        });
        for (const branch of report.branches) {
          if (branch.outcome.kind !== 'drop' && branch.outcome.kind !== 'reject') continue;
          // The rule that stopped the packet is the last one the path matched.
          const step = branch.steps.findLast((candidate) => candidate.kind === 'rule');
          if (!step || !isForeign(step)) continue;
          const key = stepKey(step);
          hits.set(key, (hits.get(key) ?? new Set()).add(sp.key));
        }
      }
  }
  return hits;
}
