// Jumps from the built-in chains into ours (kube-proxy's iptablesJumpChains). They live in chains
// we do not own, so they are not part of the restore input: the live dataplane checks and
// prepends each one (iptables -C / -I), idempotently, on every full sync.
import {
  EXTERNAL_SERVICES_CHAIN,
  FIREWALL_CHAIN,
  FORWARD_CHAIN,
  NODEPORTS_CHAIN,
  POSTROUTING_CHAIN,
  SERVICES_CHAIN,
} from './chain-names.ts';
import type { IptablesTable } from './restore-plan.ts';

export interface JumpRule {
  readonly table: IptablesTable;
  /** The built-in chain the jump sits in. */
  readonly from: string;
  /** The rule without "-A CHAIN", as iptables -C/-I takes it. */
  readonly spec: readonly string[];
}

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
  jump('nat', 'OUTPUT', SERVICES_CHAIN, 'kproxy service portals'),
  jump('nat', 'PREROUTING', SERVICES_CHAIN, 'kproxy service portals'),
  jump('nat', 'POSTROUTING', POSTROUTING_CHAIN, 'kproxy postrouting rules'),
];
