// The IPVS operations that take a kernel holding `prev` to `next`: new virtual servers with their
// real servers, changed settings, changed real servers, and last the virtual servers that went
// away. Like kube-proxy, a TCP or SCTP real server that goes away is drained (weight 0) rather than
// deleted, so its established connections finish; UDP has no connection to finish and goes at once.
import type { AddressChanges, IpvsDesired, IpvsOp } from './ipvs-plan.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualServer,
  type VirtualService,
} from './virtual-servers.ts';

/** The virtual service part of a virtual server (what the kernel's service commands take). */
export function serviceOf(vs: VirtualServer): VirtualService {
  const { family, protocol, address, port, scheduler, persistenceTimeout } = vs;
  return { family, protocol, address, port, scheduler, persistenceTimeout };
}

export function sameSettings(a: VirtualService, b: VirtualService): boolean {
  return a.scheduler === b.scheduler && a.persistenceTimeout === b.persistenceTimeout;
}

/** Whether a real server that goes away keeps serving its connections for a while. */
export function drainsGracefully(service: VirtualService): boolean {
  return service.protocol !== 'UDP';
}

function diffRealServers(prev: VirtualServer, next: VirtualServer, out: IpvsOp[], gone: IpvsOp[]): void {
  const service = serviceOf(next);
  const before = new Map<string, RealServer>(prev.realServers.map((rs) => [realServerKey(rs), rs]));
  const after = new Set<string>();
  for (const server of next.realServers) {
    const key = realServerKey(server);
    after.add(key);
    const old = before.get(key);
    if (old === undefined) out.push({ op: 'add-server', service, server });
    else if (old.weight !== server.weight) out.push({ op: 'edit-server', service, server });
  }
  for (const [key, server] of before) {
    if (after.has(key)) continue;
    gone.push(
      drainsGracefully(service)
        ? { op: 'drain-server', service, server: { ...server, weight: 0 } }
        : { op: 'delete-server', service, server },
    );
  }
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
