// The drain lifecycle of TCP real servers (graceful termination, as kube-proxy's): a server that
// goes away is set to weight 0 (no new connection), and a sweep at the start of a later sync
// deletes it once the kernel counts no connection to it; one that comes back meanwhile gets its
// weight again. This is the live dataplane's record of those servers and the sweep.
import { type IpvsClient, type IpvsCommand, isGone } from './ipvs-client.ts';
import type { DumpedRealServer } from './ipvs-messages.ts';
import type { IpvsOp } from './ipvs-plan.ts';
import { type RealServer, realServerKey, type VirtualService, virtualServerKey } from './virtual-servers.ts';

/**
 * The drain sweep reads a service's connection counts by dumping all of its real servers (IPVS has
 * no request for one), so a service of more than this many is not dumped at every sync: one
 * endpoint change of a wide Service would cost a dump of its every endpoint (10,000: most of the
 * 2.07 s a change took in the emulated VM, docs/benchmarks-log.md).
 */
export const DRAIN_SWEEP_EVERY_SYNC_MAX = 1000;
/**
 * A bigger service is swept at most once per this many ms, kube-proxy's interval for checking its
 * draining real servers (graceful_termination.go, rsCheckDeleteInterval), so its dumps cost a
 * bounded share of the time however fast its endpoints change. A drained server lingers at
 * weight 0 (no new connection) up to that much longer. A shorter one proportional to the service
 * (1 s at 10,000) still dumped at nearly every change in the emulated VM, where a change took ~1 s.
 */
export const DRAIN_SWEEP_BIG_SERVICE_MS = 60_000;

interface Draining {
  readonly service: VirtualService;
  readonly server: RealServer;
}

function drainKey(
  service: Pick<VirtualService, 'protocol' | 'address' | 'port'>,
  server: Pick<RealServer, 'address' | 'port'>,
): string {
  return `${virtualServerKey(service)}|${realServerKey(server)}`;
}

export class DrainingServers {
  /** Real servers at weight 0 until their connections end, by "service key|server key". */
  readonly #draining = new Map<string, Draining>();
  /** When a big service's draining servers may be swept again, by service key. */
  readonly #nextSweep = new Map<string, number>();
  /** Milliseconds on a monotonic clock. */
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  get size(): number {
    return this.#draining.size;
  }

  /** Whether `server` of `service` is at weight 0 because this record drains it. */
  has(
    service: Pick<VirtualService, 'protocol' | 'address' | 'port'>,
    server: Pick<RealServer, 'address' | 'port'>,
  ): boolean {
    return this.#draining.has(drainKey(service, server));
  }

  /** Forgets every server: what drains is re-decided from a dump (a full sync) or nothing is ours. */
  clear(): void {
    this.#draining.clear();
    this.#nextSweep.clear();
  }

  /**
   * What the kernel is sent for `op`. A plan touches each real server once, so no earlier op of
   * the same plan changes what this one is sent.
   */
  commandOf(op: IpvsOp): IpvsCommand {
    switch (op.op) {
      case 'add-server':
        // A server coming back while it drains is still in the kernel: give it its weight again.
        return this.#draining.delete(drainKey(op.service, op.server)) ? { ...op, op: 'edit-server' } : op;
      case 'drain-server':
        return { ...op, op: 'edit-server' };
      default:
        return op;
    }
  }

  /** The record after `op`, which the kernel did. */
  applied(op: IpvsOp): void {
    switch (op.op) {
      case 'delete-service': {
        const serviceKey = virtualServerKey(op.service);
        this.#nextSweep.delete(serviceKey);
        for (const key of this.#draining.keys()) {
          if (key.startsWith(`${serviceKey}|`)) this.#draining.delete(key);
        }
        break;
      }
      case 'drain-server':
        this.#draining.set(drainKey(op.service, op.server), { service: op.service, server: op.server });
        break;
      case 'delete-server':
        this.#draining.delete(drainKey(op.service, op.server));
    }
  }

  /**
   * Deletes the draining real servers whose connections have ended: each service's with one dump
   * of its real servers (`realServers` says how many it has), a big one's at most once per
   * DRAIN_SWEEP_BIG_SERVICE_MS. A server the dump lacks is gone from the kernel and forgotten. A
   * refusal other than the service being gone is thrown with the record unchanged for what it
   * did not reach, so the next sweep tries again.
   */
  async sweep(client: IpvsClient, realServers: (serviceKey: string) => number): Promise<void> {
    const byService = new Map<string, Draining[]>();
    for (const d of this.#draining.values()) {
      const key = virtualServerKey(d.service);
      const list = byService.get(key);
      if (list === undefined) byService.set(key, [d]);
      else list.push(d);
    }
    for (const [serviceKey, list] of byService) {
      if (realServers(serviceKey) > DRAIN_SWEEP_EVERY_SYNC_MAX) {
        if (this.#now() < (this.#nextSweep.get(serviceKey) ?? 0)) continue;
        this.#nextSweep.set(serviceKey, this.#now() + DRAIN_SWEEP_BIG_SERVICE_MS);
      }
      const service = list[0]!.service;
      const connections = new Map<string, number>();
      for (const rs of await dumpUnlessGone(client, service)) {
        connections.set(realServerKey(rs), rs.activeConnections + rs.inactiveConnections);
      }
      for (const d of list) {
        const count = connections.get(realServerKey(d.server));
        if (count === 0) await client.deleteServer(service, d.server);
        if (count === undefined || count === 0) this.#draining.delete(drainKey(service, d.server));
      }
    }
  }
}

/**
 * `service`'s real servers, none when the service is gone. The kernel answers a dump of a service
 * it lacks with no server (ip_vs_genl_dump_dests); a refusal saying so (ENOENT, ESRCH) means the
 * same. Any other failure is thrown: its servers are not known to be gone.
 */
async function dumpUnlessGone(client: IpvsClient, service: VirtualService): Promise<DumpedRealServer[]> {
  try {
    return await client.listServers(service);
  } catch (err) {
    if (isGone(err)) return [];
    throw err;
  }
}
