// What the kernel holds against what kproxy would install, in one mode-neutral shape: the pieces
// that differ, each with the Service port it belongs to, the rules of other owners that change a
// Service's packets, and what could not be read. `kproxy diff` prints it; each dataplane's reader
// fills it (dataplanes/<mode>/drift.ts).
import type { DualStackState, ServicePort } from '../../../contract/proxy-state.ts';

export type DriftKind = 'missing' | 'extra' | 'different';
export const DRIFT_KINDS: readonly DriftKind[] = ['missing', 'extra', 'different'];

/** One piece of kproxy's rules that the kernel lacks, holds besides, or holds otherwise. */
export interface DriftPiece {
  readonly kind: DriftKind;
  /** The Service port ("ns/name:port/PROTO") the piece serves, or NODE_WIDE for shared pieces. */
  readonly service: string;
  /** Where it lives: "ip kproxy chain services", "ip kproxy map backends-tcp". */
  readonly where: string;
  /** The piece as the kernel lists it (missing: as kproxy would write it). */
  readonly text: string;
  /** For `different`: what kproxy would write instead. */
  readonly expected?: string;
}

/** A rule of another owner on a hook where Service packets pass. */
export interface ForeignRule {
  readonly where: string;
  readonly text: string;
  /** The Service ports whose packets the rule drops or rejects (the trace engine's finding). */
  readonly hits: readonly string[];
}

export interface DriftReport {
  readonly mode: string;
  readonly pieces: readonly DriftPiece[];
  readonly foreign: readonly ForeignRule[];
  /** What could not be read, and why: the comparison covers everything else. */
  readonly unreadable: readonly string[];
}

/**
 * Compares the kernel with what kproxy would install for `state`: each mode's drift.ts builds one
 * (through its build.ts), for `kproxy diff` and the daemon's integrity checks alike.
 */
export type DriftReader = (state: DualStackState) => Promise<DriftReport>;

/** Every Service port of both families, as the readers attribute pieces to them. */
export function servicePortsOf(state: DualStackState): ServicePort[] {
  return [...(state.IPv4?.servicePorts.values() ?? []), ...(state.IPv6?.servicePorts.values() ?? [])];
}

/**
 * Rules compared as a multiset (a reordered chain is not drift): what `want` holds that `have`
 * lacks, and what `have` holds besides, each as often as it is missing or extra.
 */
export function multisetDifference(
  want: readonly string[],
  have: readonly string[],
): { missing: string[]; extra: string[] } {
  const remaining = new Map<string, number>();
  for (const text of have) remaining.set(text, (remaining.get(text) ?? 0) + 1);
  const missing: string[] = [];
  for (const text of want) {
    const left = remaining.get(text) ?? 0;
    if (left > 0) remaining.set(text, left - 1);
    else missing.push(text);
  }
  const extra = [...remaining].flatMap(([text, count]) => Array<string>(count).fill(text));
  return { missing, extra };
}

/** The foreign rules found (keyed as `hits` is), each with the Service ports it drops, sorted. */
export function judged(
  rules: ReadonlyMap<string, { readonly where: string; readonly text: string }>,
  hits: ReadonlyMap<string, ReadonlySet<string>>,
): ForeignRule[] {
  return [...rules].map(([key, { where, text }]) => ({
    where,
    text,
    hits: [...(hits.get(key) ?? [])].sort(),
  }));
}

/** Pieces that serve no single Service port (hook chains, shared dispatch chains, node sets). */
export const NODE_WIDE = '(node-wide)';

/** True when the kernel holds exactly kproxy's rules and no foreign rule changes a Service's packets. */
export function inSync(report: DriftReport): boolean {
  return report.pieces.length === 0 && report.foreign.every((rule) => rule.hits.length === 0);
}

export function countByKind(pieces: readonly DriftPiece[]): Record<DriftKind, number> {
  const counts: Record<DriftKind, number> = { missing: 0, extra: 0, different: 0 };
  for (const piece of pieces) counts[piece.kind]++;
  return counts;
}

/**
 * The Service port a piece of rule text serves, from the addresses and ports it names: an address
 * of the port (ClusterIP, external, LoadBalancer) with its port, or its node port with its
 * protocol (`protocolHint`: the set or chain name, when the text has no protocol). NODE_WIDE when
 * none or several match.
 */
export function serviceOfText(text: string, servicePorts: readonly ServicePort[], protocolHint = ''): string {
  // nft separates key parts by " . ", iptables gives "-d 10.96.0.10/32 --dport 80".
  const tokens = new Set(text.split(/[\s,{}]+/).map((word) => word.replace(/\/(32|128)$/, '')));
  const hint = `${text} ${protocolHint}`.toLowerCase();
  const owners = servicePorts.filter((sp) => {
    const addresses = [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].filter(Boolean);
    if (addresses.some((address) => tokens.has(address)) && tokens.has(String(sp.port))) return true;
    return sp.nodePort !== 0 && tokens.has(String(sp.nodePort)) && hint.includes(sp.protocol.toLowerCase());
  });
  // Ports of one address and number but several protocols: the protocol the text or set names.
  const named = owners.length > 1 ? owners.filter((sp) => hint.includes(sp.protocol.toLowerCase())) : owners;
  return named.length === 1 ? named[0]!.key : NODE_WIDE;
}

/** One piece as a person reads it (what kproxy would hold instead aside). */
export function pieceText(piece: DriftPiece): string {
  return `${piece.kind} in ${piece.where}: ${piece.text}`;
}

/** The report as a person reads it: grouped by Service port. */
export function driftText(report: DriftReport): string {
  const lines: string[] = [];
  const byService = new Map<string, DriftPiece[]>();
  for (const piece of report.pieces) {
    const list = byService.get(piece.service) ?? [];
    list.push(piece);
    byService.set(piece.service, list);
  }
  for (const [service, pieces] of [...byService].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    lines.push(`${service}:`);
    for (const piece of pieces) {
      lines.push(`  ${pieceText(piece)}`);
      if (piece.expected !== undefined) lines.push(`    kproxy would hold: ${piece.expected}`);
    }
  }
  for (const rule of report.foreign) {
    const judged =
      rule.hits.length > 0 ? `drops or rejects packets of ${rule.hits.join(', ')}` : 'changes no Service';
    lines.push(`foreign rule in ${rule.where} (${judged}): ${rule.text}`);
  }
  for (const reason of report.unreadable) lines.push(`not read: ${reason}`);
  const counts = countByKind(report.pieces);
  const hitting = report.foreign.filter((rule) => rule.hits.length > 0).length;
  lines.push(
    inSync(report)
      ? `${report.mode}: the kernel holds what kproxy would install`
      : `${report.mode}: drift: ${counts.missing} missing, ${counts.extra} extra, ${counts.different} different` +
          `, ${hitting} foreign rule(s) hitting Services`,
  );
  return `${lines.join('\n')}\n`;
}

export function driftJson(report: DriftReport): string {
  return `${JSON.stringify({ ...report, inSync: inSync(report), counts: countByKind(report.pieces) }, null, 2)}\n`;
}
