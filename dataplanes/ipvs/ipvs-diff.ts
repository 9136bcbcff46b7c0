// The IPVS operations that take a kernel holding `prev` to `next`: new virtual servers with their
// real servers, changed settings, changed real servers, and last the virtual servers that went
// away. Like kube-proxy, a TCP real server that goes away is drained (weight 0) rather than
// deleted, so its established connections finish; UDP and SCTP ones go at once (kube-proxy's
// IsRsGracefulTerminationNeeded), their flows dropped by net.ipv4.vs.expire_nodest_conn and their
// conntrack entries deleted (live.ts).
import { compareText } from '../../contract/base/compare-text.ts';
import type { AddressChanges, IpvsDesired, IpvsOp } from './ipvs-plan.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualServer,
  type VirtualService,
} from './virtual-servers.ts';

/** The virtual service part of a virtual server (what the kernel's service commands take). */
export function serviceOf(vs: VirtualServer): VirtualService {
  const { family, protocol, address, port, scheduler, schedulerFlags, persistenceTimeout } = vs;
  return { family, protocol, address, port, scheduler, schedulerFlags, persistenceTimeout };
}

export function sameSettings(a: VirtualService, b: VirtualService): boolean {
  return (
    a.scheduler === b.scheduler &&
    a.schedulerFlags.join() === b.schedulerFlags.join() &&
    a.persistenceTimeout === b.persistenceTimeout
  );
}

/** Whether a real server that goes away keeps serving its connections for a while. */
export function drainsGracefully(service: VirtualService): boolean {
  return service.protocol === 'TCP';
}

/**
 * The real server changes that take `have` to the real servers `vs` wants: additions and weight
 * edits, and for each server no longer wanted what `remove` makes of it (drain or delete). Shared
 * by the planned diff (`have` = the record) and the reconcile (`have` = a kernel dump).
 */
export function realServerChanges<T extends RealServer>(
  vs: VirtualServer,
  have: readonly T[],
  remove: (service: VirtualService, server: T) => IpvsOp,
): { readonly changed: IpvsOp[]; readonly removed: IpvsOp[] } {
  const service = serviceOf(vs);
  const before = new Map(have.map((rs) => [realServerKey(rs), rs]));
  const wanted = new Set<string>();
  const changed: IpvsOp[] = [];
  for (const server of vs.realServers) {
    const key = realServerKey(server);
    wanted.add(key);
    const old = before.get(key);
    if (old === undefined) changed.push({ op: 'add-server', service, server });
    else if (old.weight !== server.weight) changed.push({ op: 'edit-server', service, server });
  }
  const removed = [...before].filter(([key]) => !wanted.has(key)).map(([, rs]) => remove(service, rs));
  return { changed, removed };
}

function diffRealServers(prev: VirtualServer, next: VirtualServer, out: IpvsOp[], gone: IpvsOp[]): void {
  const remove = (service: VirtualService, server: RealServer): IpvsOp =>
    drainsGracefully(service)
      ? { op: 'drain-server', service, server: { ...server, weight: 0 } }
      : { op: 'delete-server', service, server };
  const { changed, removed } =
    sortedRealServerChanges(next, prev.realServers, remove) ??
    realServerChanges(next, prev.realServers, remove);
  out.push(...changed);
  gone.push(...removed);
}

function compareServers(a: RealServer, b: RealServer): number {
  return a.address === b.address ? a.port - b.port : compareText(a.address, b.address);
}

/**
 * realServerChanges in one walk of both lists (a wide Service's endpoint change compares its
 * servers, no key, map or set per server: that was most of the plan's CPU at 10,000), with the ops
 * in the same order; undefined when either list is not in the model's order (address, then port).
 */
function sortedRealServerChanges(
  vs: VirtualServer,
  have: readonly RealServer[],
  remove: (service: VirtualService, server: RealServer) => IpvsOp,
): { readonly changed: IpvsOp[]; readonly removed: IpvsOp[] } | undefined {
  const service = serviceOf(vs);
  const want = vs.realServers;
  const changed: IpvsOp[] = [];
  const removed: IpvsOp[] = [];
  let i = 0;
  let j = 0;
  while (i < have.length || j < want.length) {
    const old = have[i];
    const server = want[j];
    const order = old === undefined ? 1 : server === undefined ? -1 : compareServers(old, server);
    // Each list in order: one check when both steps are the same pair of servers.
    const samePair = order === 0 && i > 0 && j > 0 && compareServers(have[i - 1]!, want[j - 1]!) === 0;
    if (order <= 0) {
      if (i > 0 && compareServers(have[i - 1]!, old!) >= 0) return undefined;
      i++;
    }
    if (order >= 0) {
      if (!samePair && j > 0 && compareServers(want[j - 1]!, server!) >= 0) return undefined;
      j++;
    }
    if (order < 0) removed.push(remove(service, old!));
    else if (order > 0) changed.push({ op: 'add-server', service, server: server! });
    else if (old!.weight !== server!.weight) changed.push({ op: 'edit-server', service, server: server! });
  }
  return { changed, removed };
}

export function diffVirtualServers(prev: IpvsDesired, next: IpvsDesired): IpvsOp[] {
  const ops: IpvsOp[] = [];
  const gone: IpvsOp[] = [];
  for (const [key, vs] of next.virtualServers) {
    const old = prev.virtualServers.get(key);
    const service = serviceOf(vs);
    if (old === undefined) {
      ops.push({ op: 'add-service', service });
      for (const server of vs.realServers) ops.push({ op: 'add-server', service, server });
      continue;
    }
    if (!sameSettings(old, vs)) ops.push({ op: 'edit-service', service });
    diffRealServers(old, vs, ops, gone);
  }
  for (const [key, vs] of prev.virtualServers) {
    if (!next.virtualServers.has(key)) gone.push({ op: 'delete-service', service: serviceOf(vs) });
  }
  return [...ops, ...gone];
}

export function diffAddresses(prev: readonly string[], next: readonly string[]): AddressChanges {
  const before = new Set(prev);
  const after = new Set(next);
  return {
    add: next.filter((a) => !before.has(a)),
    delete: prev.filter((a) => !after.has(a)),
  };
}
