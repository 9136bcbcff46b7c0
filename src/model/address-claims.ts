// Conflicts between service ports, resolved once in the model so that no dataplane ever sees one.
//
// A service port claims its cluster IP, external IPs and LoadBalancer IPs at its port/protocol, and
// its node port/protocol. The API server does not stop two Services from claiming the same one (an
// external IP may be another Service's cluster IP; legacy objects may spell one address two ways),
// and a dataplane cannot serve both. The older Service (metadata.creationTimestamp) keeps the claim,
// ties go by namespace/name; the other loses that one address (or node port) only, and a Problem
// names both. The index is kept per family and updated per service port, so the incremental model
// pays for the claims of the services an event touches, not for the whole cluster.
import type { Service } from '../kube/objects.ts';
import { compareText } from './endpoints.ts';
import { flatText } from './flat-text.ts';
import { objectRef, type Problem } from './problem.ts';
import type { ServicePort } from './proxy-state.ts';

type ClaimKind = 'cluster IP' | 'external IP' | 'load balancer IP' | 'node port';

/** Same-service ties: a port keeps its cluster IP over its own external or LoadBalancer IP. */
const KIND_ORDER: Readonly<Record<ClaimKind, number>> = {
  'cluster IP': 0,
  'external IP': 1,
  'load balancer IP': 2,
  'node port': 3,
};

interface Claimant {
  /** The port as the Service asks for it, before any claim is taken away. */
  readonly port: ServicePort;
  readonly kind: ClaimKind;
  /** Creation time in ms; Infinity when unknown (a Service without one yields to a dated one). */
  readonly since: number;
}

/** Creation time of a Service for ordering claims; Infinity when it carries none. */
export function serviceSince(service: Service): number {
  const time = service.metadata.creationTimestamp;
  const ms = time === undefined ? Number.NaN : Date.parse(time);
  return Number.isFinite(ms) ? ms : Number.POSITIVE_INFINITY;
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

/** "10.0.0.1:80/TCP", "[fd00::1]:80/TCP", "node port 30080/TCP": the key and the text of a claim. */
function vipClaim(address: string, port: ServicePort): string {
  return address.includes(':')
    ? flatText('[', address, ']:', String(port.port), '/', port.protocol)
    : flatText(address, ':', String(port.port), '/', port.protocol);
}

function nodePortClaim(port: ServicePort): string {
  return flatText('node port ', String(port.nodePort), '/', port.protocol);
}

/** Calls `each` with every claim a port makes. */
function forEachClaim(port: ServicePort, each: (claim: string, kind: ClaimKind) => void): void {
  if (port.clusterIP !== '') each(vipClaim(port.clusterIP, port), 'cluster IP');
  for (const ip of port.externalIPs) each(vipClaim(ip, port), 'external IP');
  for (const ip of port.loadBalancerIPs) each(vipClaim(ip, port), 'load balancer IP');
  if (port.nodePort !== 0) each(nodePortClaim(port), 'node port');
}

function isClaimant(claimant: Claimant, port: ServicePort, kind: ClaimKind): boolean {
  return claimant.port.key === port.key && claimant.kind === kind;
}

/** The claims of one family's service ports, each with its claimants in order (holder first). */
export class ClaimIndex {
  /** One claimant (almost every claim) or several, holder first. */
  readonly #claims = new Map<string, Claimant | readonly Claimant[]>();
  /** Claims with more than one claimant: what problems() reports. */
  readonly #contested = new Set<string>();
  /** Service port key → how many of its claims another port holds; absent when none. */
  readonly #losing = new Map<string, number>();

  /**
   * Adds every claim of `port` (as its Service asks, `since` its creation). Services that lose a
   * claim they held are added to `touched`.
   */
  add(port: ServicePort, since: number, touched: Set<string>): void {
    forEachClaim(port, (claim, kind) => {
      const claimant: Claimant = { port, kind, since };
      const held = this.#claims.get(claim);
      if (held === undefined) {
        this.#claims.set(claim, claimant);
        return;
      }
      const claimants = Array.isArray(held) ? [...held] : [held as Claimant];
      const at = claimants.findIndex((other) => before(claimant, other));
      if (at === 0) {
        touched.add(serviceOfPort(claimants[0]!.port));
        this.#countLoss(claimants[0]!.port.key, 1);
      } else this.#countLoss(port.key, 1);
      claimants.splice(at < 0 ? claimants.length : at, 0, claimant);
      this.#claims.set(claim, claimants);
      this.#contested.add(claim);
    });
  }

  /** Removes every claim of `port`. Services that get a claim back are added to `touched`. */
  remove(port: ServicePort, touched: Set<string>): void {
    forEachClaim(port, (claim, kind) => {
      const held = this.#claims.get(claim);
      if (held === undefined) return;
      if (!Array.isArray(held)) {
        if (isClaimant(held as Claimant, port, kind)) this.#claims.delete(claim);
        return;
      }
      const rest = held.filter((other) => !isClaimant(other, port, kind));
      if (rest.length === held.length) return;
      if (isClaimant(held[0]!, port, kind)) {
        touched.add(serviceOfPort(rest[0]!.port));
        this.#countLoss(rest[0]!.port.key, -1);
      } else this.#countLoss(port.key, -1);
      if (rest.length > 1) this.#claims.set(claim, rest);
      else {
        this.#claims.set(claim, rest[0]!);
        this.#contested.delete(claim);
      }
    });
  }

  /** `port` without the claims another port holds: the port itself when it holds them all. */
  granted(port: ServicePort): ServicePort {
    if (!this.#losing.has(port.key)) return port;
    const gone = new Set<string>();
    forEachClaim(port, (claim, kind) => {
      if (!this.#holds(claim, port, kind)) gone.add(`${kind} ${claim}`);
    });
    if (gone.size === 0) return port;
    const kept = (kind: ClaimKind, ips: readonly string[]) =>
      ips.filter((ip) => !gone.has(`${kind} ${vipClaim(ip, port)}`));
    return {
      ...port,
      clusterIP: gone.has(`cluster IP ${vipClaim(port.clusterIP, port)}`) ? '' : port.clusterIP,
      externalIPs: kept('external IP', port.externalIPs),
      loadBalancerIPs: kept('load balancer IP', port.loadBalancerIPs),
      nodePort: gone.has(`node port ${nodePortClaim(port)}`) ? 0 : port.nodePort,
    };
  }

  /** One Problem per claim a port lost, naming both Services and the claim. */
  problems(): Problem[] {
    const problems: Problem[] = [];
    for (const claim of this.#contested) {
      const [holder, ...losers] = this.#claims.get(claim) as readonly Claimant[];
      for (const loser of losers) problems.push(conflictProblem(claim, holder!, loser));
    }
    return problems;
  }

  #countLoss(portKey: string, by: number): void {
    const count = (this.#losing.get(portKey) ?? 0) + by;
    if (count > 0) this.#losing.set(portKey, count);
    else this.#losing.delete(portKey);
  }

  #holds(claim: string, port: ServicePort, kind: ClaimKind): boolean {
    const held = this.#claims.get(claim);
    if (held === undefined) return false;
    return isClaimant(Array.isArray(held) ? held[0]! : (held as Claimant), port, kind);
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
  const what = (claimant: Claimant) => (claimant.kind === 'node port' ? claim : `${claimant.kind} ${claim}`);
  const holderService = serviceOfPort(holder.port);
  const loserService = serviceOfPort(loser.port);
  const whose =
    holderService === loserService
      ? `its own ${holder.kind} (${holder.port.key})`
      : `the ${holder.kind} of Service ${holderService}, ${holder.since < loser.since ? 'older' : 'as old and first by name'}`;
  return {
    object: objectRef('Service', loser.port.namespace, loser.port.name),
    reason: `${what(loser)} is already ${whose}; ${loser.port.key} goes without it`,
  };
}
