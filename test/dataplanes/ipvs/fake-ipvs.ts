// An in-memory IPVS table for unit tests: applies plan operations with the kernel's refusals
// (adding what exists, changing or deleting what does not), so a wrong incremental plan fails here.
import type { IpvsDesired, IpvsOp } from '../../../dataplanes/ipvs/ipvs-plan.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualService,
  virtualServerKey,
} from '../../../dataplanes/ipvs/virtual-servers.ts';

interface FakeService {
  service: VirtualService;
  servers: Map<string, RealServer>;
}

export type FakeIpvs = Map<string, FakeService>;

/** The kernel after a full sync of `desired` (what the live reconcile converges to). */
export function fromDesired(desired: IpvsDesired): FakeIpvs {
  const table: FakeIpvs = new Map();
  for (const [key, vs] of desired.virtualServers) {
    table.set(key, { service: vs, servers: new Map(vs.realServers.map((rs) => [realServerKey(rs), rs])) });
  }
  return table;
}

function service(table: FakeIpvs, op: IpvsOp): FakeService {
  const found = table.get(virtualServerKey(op.service));
  if (!found) throw new Error(`${op.op}: no virtual server ${virtualServerKey(op.service)} (ENOENT)`);
  return found;
}

export function applyOps(table: FakeIpvs, ops: readonly IpvsOp[]): void {
  for (const op of ops) {
    const key = virtualServerKey(op.service);
    switch (op.op) {
      case 'add-service':
        if (table.has(key)) throw new Error(`add-service ${key}: exists (EEXIST)`);
        table.set(key, { service: op.service, servers: new Map() });
        break;
      case 'edit-service':
        service(table, op).service = op.service;
        break;
      case 'delete-service':
        service(table, op);
        table.delete(key);
        break;
      case 'add-server': {
        const servers = service(table, op).servers;
        const existing = servers.get(realServerKey(op.server));
        // A draining server that comes back gets its weight again (the live dataplane does this).
        if (existing && existing.weight !== 0) throw new Error(`add-server ${key}: exists (EEXIST)`);
        servers.set(realServerKey(op.server), op.server);
        break;
      }
      case 'edit-server':
      case 'drain-server':
      case 'delete-server': {
        const servers = service(table, op).servers;
        const rs = realServerKey(op.server);
        if (!servers.has(rs)) throw new Error(`${op.op} ${key} ${rs}: no such server (ENOENT)`);
        if (op.op === 'delete-server') servers.delete(rs);
        else servers.set(rs, op.server);
      }
    }
  }
}

/** Sorted ipvsadm-like lines; draining (weight 0) servers are left out: they only finish old flows. */
export function dumpServing(table: FakeIpvs): string[] {
  const lines: string[] = [];
  for (const [key, { service: s, servers }] of [...table].sort(([a], [b]) => (a < b ? -1 : 1))) {
    lines.push(`${key} ${s.scheduler} persistent=${s.persistenceTimeout}`);
    for (const [rs, server] of [...servers].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (server.weight > 0) lines.push(`  -> ${rs} w=${server.weight}`);
    }
  }
  return lines;
}
