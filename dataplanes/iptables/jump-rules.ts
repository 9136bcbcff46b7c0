// Jumps from the built-in chains into ours (kube-proxy's iptablesJumpChains). The built-in chains
// are shared with other software, so a restore never declares (flushes) them: a full plan inserts
// each jump at the head of its chain with `-I CHAIN 1`, in the same input that fills our chains.
// An insert is not idempotent, so the plan carries the jumps that are missing: all of them on an
// empty node (planFull, what render prints); the live dataplane checks each with `iptables -C`
// before a full sync and keeps only the missing ones (see README.md).
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
