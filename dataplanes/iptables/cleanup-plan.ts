// The restore inputs that remove everything kproxy owns in one table, from its iptables-save
// output: every rule of a foreign chain that jumps into a KPROXY chain, then every KPROXY chain,
// large removals in parts (removalInputs, shared with the removal of kube-proxy's leftovers).

import { removalInputs } from '../shared/iptables-save.ts';
import { ENDPOINT_CHAIN_PREFIX, isKproxyChain } from './chain-names.ts';

/** kproxy's per-service chains, each before the chains it may jump to. */
const REFERRER_ORDER = ['KPROXY-FW-', 'KPROXY-EXT-', 'KPROXY-SVC-', 'KPROXY-SVL-', ENDPOINT_CHAIN_PREFIX];

export function cleanupInputs(table: string, saved: string, maxChains: number): string[] {
  return removalInputs(table, saved, isKproxyChain, REFERRER_ORDER, maxChains);
}
