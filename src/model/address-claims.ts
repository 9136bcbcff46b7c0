// Conflicts between service ports, resolved once in the model so that no dataplane ever sees one.
//
// A service port claims its cluster IP, external IPs and LoadBalancer IPs at its port/protocol, its
// node port/protocol and its Service's health check node port (one listener per node, shared by the
// Service's ports). The API server does not stop two Services from claiming the same one (an
// external IP may be another Service's cluster IP; legacy objects may spell one address two ways;
// a health check node port may be set by hand), and a node cannot serve both. The older Service
// (metadata.creationTimestamp) keeps the claim, ties go by namespace/name; the other loses that one
// address (or port) only, and a Problem names both. The index is kept per family and updated per service port, so the incremental model
// pays for the claims of the services an event touches, not for the whole cluster.

import { compareText } from '../../contract/base/compare-text.ts';
import { flatText } from '../../contract/base/flat-text.ts';
import { objectRef, type Problem } from '../../contract/base/problem.ts';
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { ProxiedService } from './kept-service.ts';

type ClaimKind = 'cluster IP' | 'external IP' | 'load balancer IP' | 'node port' | 'health check node port';

/** Same-service ties: a port keeps its cluster IP over its own external or LoadBalancer IP. */
const KIND_ORDER: Readonly<Record<ClaimKind, number>> = {
  'cluster IP': 0,
  'external IP': 1,
  'load balancer IP': 2,
  'node port': 3,
  'health check node port': 4,
};

interface Claimant {
  /** The port as the Service asks for it, before any claim is taken away. */
  readonly port: ServicePort;
  readonly kind: ClaimKind;
  /** Creation time in seconds; Infinity when unknown (a Service without one yields to a dated one). */
  readonly since: number;
}

/** Creation time of a Service for ordering claims; Infinity when it carries none. */
export function serviceSince(service: Pick<ProxiedService, 'creationTimestamp'>): number {
  return service.creationTimestamp ?? Number.POSITIVE_INFINITY;
}

/** "namespace/name" of the Service a port belongs to (serviceKey in build-state.ts). */
export function serviceOfPort(port: ServicePort): string {
  return flatText(port.namespace, '/', port.name);
}

function before(a: Claimant, b: Claimant): boolean {
  if (a.since !== b.since) return a.since < b.since;
  const byName = compareText(a.port.namespace, b.port.namespace) || compareText(a.port.name, b.port.name);
  if (byName !== 0) return byName < 0;
  const byPort = compareText(a.port.key, b.port.key);
  return byPort !== 0 ? byPort < 0 : KIND_ORDER[a.kind] < KIND_ORDER[b.kind];
}

/** "10.0.0.1:80/TCP", "[fd00::1]:80/TCP": the text of an address claim, and its contest's key. */
function vipClaim(address: string, port: ServicePort): string {
  return address.includes(':')
    ? flatText('[', address, ']:', String(port.port), '/', port.protocol)
    : flatText(address, ':', String(port.port), '/', port.protocol);
}

/** "node port 30080/TCP". */
function nodePortClaim(port: ServicePort): string {
  return flatText('node port ', String(port.nodePort), '/', port.protocol);
}

const VIP = 0;
const NODE_PORT = 1;
const HEALTH_CHECK = 2;
type Space = typeof VIP | typeof NODE_PORT | typeof HEALTH_CHECK;

/** Calls `each` with every claim a port makes: an address or a node port (its id), of a kind. */
function forEachClaim(
  port: ServicePort,
  each: (space: Space, id: string | number, kind: ClaimKind) => void,
): void {
  if (port.clusterIP !== '') each(VIP, port.clusterIP, 'cluster IP');
  for (const ip of port.externalIPs) each(VIP, ip, 'external IP');
  for (const ip of port.loadBalancerIPs) each(VIP, ip, 'load balancer IP');
  if (port.nodePort !== 0) each(NODE_PORT, port.nodePort, 'node port');
  if (port.healthCheckNodePort !== 0) each(HEALTH_CHECK, port.healthCheckNodePort, 'health check node port');
}

/**
 * Every claim a port makes, as its contest's text; `sharedByService` for a health check node port,
 * which all ports of one Service hold together (src/sync/sync-rounds.ts keeps contenders together).
 */
export function forEachClaimText(
  port: ServicePort,
  each: (claim: string, sharedByService: boolean) => void,
): void {
  forEachClaim(port, (space, id) => each(claimText(space, id, port), space === HEALTH_CHECK));
}

function claimText(space: Space, id: string | number, port: ServicePort): string {
  if (space === VIP) return vipClaim(id as string, port);
  return space === NODE_PORT ? nodePortClaim(port) : flatText('health check node port ', String(id));
}

/**
 * The holders of one address (or node port): one port per port/protocol (per protocol for a node
 * port, one for a health check node port). Almost always a single port, stored as itself: the index then costs a map entry per
 * address, keyed by the address text the ports already hold.
 */
type Slot = ServicePort | readonly ServicePort[];

function sameClaim(a: ServicePort, b: ServicePort, space: Space): boolean {
  return space === HEALTH_CHECK || (a.protocol === b.protocol && (space === NODE_PORT || a.port === b.port));
}

function holderIn(slot: Slot, port: ServicePort, space: Space): ServicePort | undefined {
  if (!Array.isArray(slot))
    return sameClaim(slot as ServicePort, port, space) ? (slot as ServicePort) : undefined;
  return (slot as readonly ServicePort[]).find((holder) => sameClaim(holder, port, space));
}

function withHolder(slot: Slot | undefined, port: ServicePort, space: Space): Slot {
  if (slot === undefined) return port;
  const holders = Array.isArray(slot) ? (slot as readonly ServicePort[]) : [slot as ServicePort];
  const others = holders.filter((holder) => !sameClaim(holder, port, space));
  return others.length === 0 ? port : [...others, port];
}

function withoutHolder(slot: Slot, port: ServicePort, space: Space): Slot | undefined {
  if (!Array.isArray(slot)) return undefined;
  const rest = (slot as readonly ServicePort[]).filter((holder) => !sameClaim(holder, port, space));
  return rest.length === 1 ? rest[0] : rest;
}

/** The kind of the one claim an uncontested holder makes on `id`. */
function kindOf(holder: ServicePort, space: Space, id: string | number): ClaimKind {
  if (space === NODE_PORT) return 'node port';
  if (space === HEALTH_CHECK) return 'health check node port';
  if (holder.clusterIP === id) return 'cluster IP';
  return holder.externalIPs.includes(id as string) ? 'external IP' : 'load balancer IP';
}

function isClaimant(claimant: Claimant, port: ServicePort, kind: ClaimKind): boolean {
  return claimant.port.key === port.key && claimant.kind === kind;
}

/** Whether `claimant` goes without what `holder` holds: a Service's ports share its health check port. */
function loses(claimant: Claimant, holder: Claimant): boolean {
  if (claimant === holder) return false;
  return (
    claimant.kind !== 'health check node port' || serviceOfPort(claimant.port) !== serviceOfPort(holder.port)
  );
}

/**
 * The claims of one family's service ports: who holds each address:port/protocol and node
 * port/protocol, and for the few claimed twice, every claimant in order (holder first).
 */
export class ClaimIndex {
  /** Creation time of a port's Service, asked only when a second port claims what it holds. */
  readonly #sinceOf: (port: ServicePort) => number;
  readonly #addresses = new Map<string, Slot>();
  readonly #nodePorts = new Map<number, Slot>();
  readonly #healthChecks = new Map<number, Slot>();
  /** Claim text → its claimants, holder first; only claims with more than one. */
  readonly #contests = new Map<string, Claimant[]>();
  /** Service port key → how many of its claims another port holds; absent when none. */
  readonly #losing = new Map<string, number>();

  constructor(sinceOf: (port: ServicePort) => number) {
    this.#sinceOf = sinceOf;
  }

  /**
   * Adds every claim of `port` (as its Service asks, `since` its creation). Services that lose a
   * claim they held are added to `touched`.
   */
  add(port: ServicePort, since: number, touched: Set<string>): void {
    forEachClaim(port, (space, id, kind) => {
      const slots = this.#slots(space);
      const slot = slots.get(id);
      const holder = slot && holderIn(slot, port, space);
      if (holder === undefined) {
        slots.set(id, withHolder(slot, port, space));
        return;
      }
      const text = claimText(space, id, port);
      const claimants = this.#contests.get(text) ?? [
        { port: holder, kind: kindOf(holder, space, id), since: this.#sinceOf(holder) },
      ];
      const claimant: Claimant = { port, kind, since };
      const at = claimants.findIndex((other) => before(claimant, other));
      this.#rearrange(claimants, touched, () => {
        claimants.splice(at < 0 ? claimants.length : at, 0, claimant);
        return undefined;
      });
      if (at === 0) slots.set(id, withHolder(slot, port, space));
      this.#contests.set(text, claimants);
    });
  }

  /** Removes every claim of `port`. Services that get a claim back are added to `touched`. */
  remove(port: ServicePort, touched: Set<string>): void {
    forEachClaim(port, (space, id, kind) => {
      const slots = this.#slots(space);
      const slot = slots.get(id);
      if (slot === undefined) return;
      const text = this.#contests.size === 0 ? undefined : claimText(space, id, port);
      const claimants = text === undefined ? undefined : this.#contests.get(text);
      if (claimants === undefined) {
        if (holderIn(slot, port, space)?.key !== port.key) return;
        const rest = withoutHolder(slot, port, space);
        if (rest === undefined) slots.delete(id);
        else slots.set(id, rest);
        return;
      }
      const at = claimants.findIndex((claimant) => isClaimant(claimant, port, kind));
      if (at < 0) return;
      this.#rearrange(claimants, touched, () => claimants.splice(at, 1)[0]);
      if (at === 0) slots.set(id, withHolder(slot, claimants[0]!.port, space));
      if (claimants.length === 1) this.#contests.delete(text!);
    });
  }

  /** `port` without the claims another port holds: the port itself when it holds them all. */
  granted(port: ServicePort): ServicePort {
    if (!this.#losing.has(port.key)) return port;
    const gone = new Set<string>();
    forEachClaim(port, (space, id, kind) => {
      if (!this.#holds(space, id, port, kind)) gone.add(`${kind} ${id}`);
    });
    if (gone.size === 0) return port;
    const kept = (kind: ClaimKind, ips: readonly string[]) => ips.filter((ip) => !gone.has(`${kind} ${ip}`));
    return {
      ...port,
      clusterIP: gone.has(`cluster IP ${port.clusterIP}`) ? '' : port.clusterIP,
      externalIPs: kept('external IP', port.externalIPs),
      loadBalancerIPs: kept('load balancer IP', port.loadBalancerIPs),
      nodePort: gone.has(`node port ${port.nodePort}`) ? 0 : port.nodePort,
      healthCheckNodePort: gone.has(`health check node port ${port.healthCheckNodePort}`)
        ? 0
        : port.healthCheckNodePort,
    };
  }

  /** One Problem per claim a port lost, naming both Services and the claim. */
  problems(): Problem[] {
    const problems: Problem[] = [];
    for (const [claim, claimants] of this.#contests) {
      const holder = claimants[0]!;
      for (const loser of claimants)
        if (loses(loser, holder)) problems.push(conflictProblem(claim, holder, loser));
    }
    return problems;
  }

  #slots(space: Space): Map<string | number, Slot> {
    const slots = [this.#addresses, this.#nodePorts, this.#healthChecks][space];
    return slots as Map<string | number, Slot>;
  }

  #holds(space: Space, id: string | number, port: ServicePort, kind: ClaimKind): boolean {
    const claimants = this.#contests.get(claimText(space, id, port));
    if (claimants !== undefined) {
      const mine = claimants.find((claimant) => isClaimant(claimant, port, kind));
      return mine !== undefined && !loses(mine, claimants[0]!);
    }
    const slot = this.#slots(space).get(id);
    return slot !== undefined && holderIn(slot, port, space)?.key === port.key;
  }

  /**
   * Changes a contest's claimants (`change` returns the one it took out, if any) and the loss
   * counts with them; Services that lose or get back the claim are added to `touched`.
   */
  #rearrange(claimants: Claimant[], touched: Set<string>, change: () => Claimant | undefined): void {
    const lostBefore = new Set(claimants.filter((claimant) => loses(claimant, claimants[0]!)));
    const gone = change();
    if (gone !== undefined && lostBefore.has(gone)) this.#countLoss(gone.port.key, -1);
    for (const claimant of claimants) {
      const lost = loses(claimant, claimants[0]!);
      if (lost === lostBefore.has(claimant)) continue;
      this.#countLoss(claimant.port.key, lost ? 1 : -1);
      touched.add(serviceOfPort(claimant.port));
    }
  }

  #countLoss(portKey: string, by: number): void {
    const count = (this.#losing.get(portKey) ?? 0) + by;
    if (count > 0) this.#losing.set(portKey, count);
    else this.#losing.delete(portKey);
  }
}

/** The problems of both families' indexes; a dual-stack node port conflict is reported once. */
export function conflictProblems(indexes: readonly ClaimIndex[]): Problem[] {
  const seen = new Set<string>();
  const problems: Problem[] = [];
  for (const index of indexes) {
    for (const problem of index.problems()) {
      const text = `${problem.object}: ${problem.reason}`;
      if (!seen.has(text)) problems.push(problem);
      seen.add(text);
    }
  }
  return problems;
}

function conflictProblem(claim: string, holder: Claimant, loser: Claimant): Problem {
  // A node port's claim text names its kind already.
  const what = (claimant: Claimant) =>
    claimant.kind.endsWith('node port') ? claim : `${claimant.kind} ${claim}`;
  const object = objectRef('Service', loser.port.namespace, loser.port.name);
  if (holder.port.key === loser.port.key)
    return { object, reason: `${what(loser)} is also its ${holder.kind}; served once, as that` };
  const holderService = serviceOfPort(holder.port);
  const whose =
    holderService === serviceOfPort(loser.port)
      ? `the ${holder.kind} of its port ${holder.port.key}`
      : `the ${holder.kind} of Service ${holderService}, ${holder.since < loser.since ? 'older' : 'as old and first by name'}`;
  return { object, reason: `${what(loser)} is already ${whose}; ${loser.port.key} goes without it` };
}
