// Jumps from the built-in chains into ours (kube-proxy's iptablesJumpChains). The built-in chains
// are shared with other software, so a restore never declares (flushes) them: a full plan inserts
// each jump at the head of its chain with `-I CHAIN 1`, in the same input that fills our chains.
// An insert is not idempotent, so the plan carries the jumps that are missing: all of them on an
// empty node (planFull, what render prints); before a full sync the live dataplane lists each
// built-in chain once (`iptables -S CHAIN`), decides from it what it can (jumpListed), checks the
// rest with `iptables -C`, and keeps only the missing ones (see README.md).
import type { IPFamily } from '../../contract/base/ip-family.ts';
import {
  EXTERNAL_SERVICES_CHAIN,
  FIREWALL_CHAIN,
  FORWARD_CHAIN,
  LOCALNET_FIREWALL_CHAIN,
  NODEPORTS_CHAIN,
  POSTROUTING_CHAIN,
  SERVICES_CHAIN,
} from './chain-names.ts';
import type { IptablesTable, JumpRule } from './plan-types.ts';
import { savedSpelling } from './saved-spelling.ts';

const NEW = ['-m', 'conntrack', '--ctstate', 'NEW'];

function jump(
  table: IptablesTable,
  from: string,
  to: string,
  note: string,
  extra: readonly string[] = [],
): JumpRule {
  return { table, from, spec: [...extra, '-m', 'comment', '--comment', note, '-j', to] };
}

/** In insertion order: each goes to the head, so the last one of a chain ends up first. */
export const JUMP_RULES: readonly JumpRule[] = [
  jump('filter', 'INPUT', EXTERNAL_SERVICES_CHAIN, 'kproxy externally-visible service portals', NEW),
  jump('filter', 'FORWARD', EXTERNAL_SERVICES_CHAIN, 'kproxy externally-visible service portals', NEW),
  jump('filter', 'INPUT', NODEPORTS_CHAIN, 'kproxy health check service ports'),
  jump('filter', 'FORWARD', SERVICES_CHAIN, 'kproxy service portals', NEW),
  jump('filter', 'OUTPUT', SERVICES_CHAIN, 'kproxy service portals', NEW),
  jump('filter', 'FORWARD', FORWARD_CHAIN, 'kproxy forwarding rules'),
  jump('filter', 'INPUT', FIREWALL_CHAIN, 'kproxy load balancer firewall', NEW),
  jump('filter', 'OUTPUT', FIREWALL_CHAIN, 'kproxy load balancer firewall', NEW),
  jump('filter', 'FORWARD', FIREWALL_CHAIN, 'kproxy load balancer firewall', NEW),
  // kube-proxy ensures these jumps to KUBE-FIREWALL always; the chain is empty unless localhost
  // node ports are served.
  jump('filter', 'INPUT', LOCALNET_FIREWALL_CHAIN, 'kproxy localnet firewall'),
  jump('filter', 'OUTPUT', LOCALNET_FIREWALL_CHAIN, 'kproxy localnet firewall'),
  jump('nat', 'OUTPUT', SERVICES_CHAIN, 'kproxy service portals'),
  jump('nat', 'PREROUTING', SERVICES_CHAIN, 'kproxy service portals'),
  jump('nat', 'POSTROUTING', POSTROUTING_CHAIN, 'kproxy postrouting rules'),
];

/** The jumps that live in `table`. */
export function jumpsOf(table: IptablesTable): readonly JumpRule[] {
  return JUMP_RULES.filter((rule) => rule.table === table);
}

/** The jump as an iptables-restore line: `-I CHAIN 1 ...`, words with spaces quoted. */
export function insertLine({ from, spec }: JumpRule): string {
  return `-I ${from} 1 ${spec.map((word) => (word.includes(' ') ? `"${word}"` : word)).join(' ')}`;
}

/**
 * Whether `jump` is in its chain, from the chain's listing (`iptables -S CHAIN` lines): true when a
 * rule is listed in the jump's saved spelling, false when no rule of the chain jumps to the jump's
 * target at all (every rule's target is listed as `-j TARGET`), undefined otherwise (a rule into
 * that target spelled otherwise: `iptables -C`, which compares rules as the kernel holds them,
 * decides). Was one `iptables -C` per jump, each a process reading the table.
 */
export function jumpListed(
  family: IPFamily,
  jump: JumpRule,
  listing: readonly string[],
): boolean | undefined {
  const spelled = savedSpelling(family, jump.spec).map((word) =>
    /\s/.test(word) ? JSON.stringify(word) : word,
  );
  if (listing.includes(`-A ${jump.from} ${spelled.join(' ')}`)) return true;
  const to = jump.spec.at(-1);
  const intoTarget = (line: string) =>
    line.split(' ').some((word, at, words) => word === '-j' && words[at + 1] === to);
  return listing.some((line) => line.startsWith(`-A ${jump.from} `) && intoTarget(line)) ? undefined : false;
}
