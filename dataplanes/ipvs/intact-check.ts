// What the IPVS intact check compares, beyond the companion table's `nft -c` scripts: the virtual
// servers the kernel lists (one dump) against the record, each with its scheduler and persistence;
// the addresses bound to the dummy link (one `ip` listing: an address taken away makes its
// virtual servers unreachable); and the real servers of the virtual servers whose turn it is (one
// dump per virtual server, so in turns of REAL_SERVER_BUDGET: every one within
// virtual servers / budget checks).
import { sameSettings } from './ipvs-diff.ts';
import type { IpvsDesired } from './ipvs-plan.ts';
import {
  type RealServer,
  realServerKey,
  type VirtualServer,
  type VirtualService,
  virtualServerKey,
} from './virtual-servers.ts';

/** Virtual servers whose real servers one check lists: ~500 netlink dumps, tens of ms. */
export const REAL_SERVER_BUDGET = 500;

/** The first recorded virtual server the kernel lacks or holds with other settings, as text. */
export function virtualServerDamage(
  listed: readonly VirtualService[],
  record: IpvsDesired,
): string | undefined {
  const kernel = new Map(listed.map((service) => [virtualServerKey(service), service]));
  for (const [key, service] of record.virtualServers) {
    const found = kernel.get(key);
    if (found === undefined) return `virtual server ${key} is missing`;
    if (!sameSettings(found, service)) return `virtual server ${key} has other settings`;
  }
  return undefined;
}

/** The first recorded address not bound to the dummy link. */
export function boundAddressDamage(bound: readonly string[], record: IpvsDesired): string | undefined {
  const present = new Set(bound);
  const missing = record.boundAddresses.find((address) => !present.has(address));
  return missing === undefined ? undefined : `address ${missing} is not bound`;
}

/**
 * The first real server of `service` the kernel lacks, weighs otherwise than the record, or holds
 * besides it: a server the record does not hold is kproxy's only at weight 0 while this dataplane
 * drains it (until its connections end); any other sends the Service's clients somewhere of
 * someone else's choosing.
 */
export function realServerDamage(
  service: VirtualServer,
  listed: readonly RealServer[],
  drains: (server: RealServer) => boolean,
): string | undefined {
  const kernel = new Map(listed.map((server) => [realServerKey(server), server]));
  const where = (server: RealServer) =>
    `real server ${realServerKey(server)} of ${virtualServerKey(service)}`;
  for (const server of service.realServers) {
    const found = kernel.get(realServerKey(server));
    kernel.delete(realServerKey(server));
    if (found === undefined) return `${where(server)} is missing`;
    if (found.weight !== server.weight)
      return `${where(server)} has weight ${found.weight}, ${server.weight} committed`;
  }
  for (const server of kernel.values()) {
    if (server.weight !== 0 || !drains(server)) return `${where(server)} was added (weight ${server.weight})`;
  }
  return undefined;
}

/** Which virtual servers' real servers each check lists, in turns through the record. */
export class RealServerTurns {
  readonly #budget: number;
  /** The key after which the next turn starts (keys in the record's order). */
  #last: string | undefined;

  constructor(budget = REAL_SERVER_BUDGET) {
    this.#budget = budget;
  }

  next(record: IpvsDesired): VirtualServer[] {
    const servers = [...record.virtualServers.values()];
    const keys = [...record.virtualServers.keys()];
    const after = this.#last === undefined ? -1 : keys.indexOf(this.#last);
    const start = after + 1 >= servers.length ? 0 : after + 1;
    const turn = [...servers.slice(start), ...servers.slice(0, start)].slice(0, this.#budget);
    if (turn.length > 0) this.#last = virtualServerKey(turn[turn.length - 1]!);
    return turn;
  }
}
