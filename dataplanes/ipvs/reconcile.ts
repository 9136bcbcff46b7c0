// Full sync against what the kernel actually holds (a dump), not against a record: the operations
// that turn the dumped table into the desired one, touching only virtual servers that are ours.
import { drainsGracefully, realServerChanges, sameSettings, serviceOf } from './ipvs-diff.ts';
import type { DumpedRealServer } from './ipvs-messages.ts';
import type { IpvsDesired, IpvsOp } from './ipvs-plan.ts';
import { type VirtualServer, type VirtualService, virtualServerKey } from './virtual-servers.ts';

/** The real servers a desired virtual server needs changed, given what the kernel has. */
export function reconcileServers(vs: VirtualServer, dumped: readonly DumpedRealServer[]): IpvsOp[] {
  const { changed, removed } = realServerChanges(vs, dumped, (service, rs) => {
    const server = { address: rs.address, port: rs.port, weight: 0 };
    const busy = rs.activeConnections + rs.inactiveConnections > 0;
    // Draining again at weight 0 is harmless and puts the server back on the sweep list.
    return drainsGracefully(service) && busy
      ? { op: 'drain-server', service, server }
      : { op: 'delete-server', service, server };
  });
  return [...changed, ...removed];
}

/**
 * Service-level operations: add what is missing, edit changed settings, delete the dumped
 * virtual servers that `isOurs` claims and that are no longer desired. Real servers of
 * surviving services are reconciled separately (they need a dump per service).
 */
export function reconcileServices(
  desired: IpvsDesired,
  dumped: readonly VirtualService[],
  isOurs: (service: VirtualService) => boolean,
): { ops: IpvsOp[]; existing: VirtualServer[] } {
  const have = new Map(dumped.map((s) => [virtualServerKey(s), s]));
  const ops: IpvsOp[] = [];
  const existing: VirtualServer[] = [];
  for (const [key, vs] of desired.virtualServers) {
    const found = have.get(key);
    if (found === undefined) {
      ops.push({ op: 'add-service', service: serviceOf(vs) });
      for (const server of vs.realServers) ops.push({ op: 'add-server', service: serviceOf(vs), server });
      continue;
    }
    if (!sameSettings(found, vs)) ops.push({ op: 'edit-service', service: serviceOf(vs) });
    existing.push(vs);
  }
  for (const [key, service] of have) {
    if (!desired.virtualServers.has(key) && isOurs(service)) ops.push({ op: 'delete-service', service });
  }
  return { ops, existing };
}
