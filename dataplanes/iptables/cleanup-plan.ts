// The restore inputs that remove everything kproxy owns in one table, from its iptables-save
// output: every rule of a foreign chain that jumps into a KPROXY chain, then every KPROXY chain.
// Like restore-chunks.ts, large removals go in parts (iptables-nft-restore is quadratic in the
// chains one input declares): first the jumps and the top-level chains' rules, which leaves the
// service chains referenced only by each other; then the service chains, referrers before the
// chains they jump to (FW → EXT → SVC/SVL → TEP); then the empty top-level chains.

import { compareText } from '../../contract/base/compare-text.ts';
import { jumpsInto, removalInput, restoreSection, savedChainNames } from '../shared/iptables-save.ts';
import { ENDPOINT_CHAIN_PREFIX, isKproxyChain, isServiceChain } from './chain-names.ts';
import type { IptablesTable } from './restore-plan.ts';

const REFERRER_ORDER = ['KPROXY-FW-', 'KPROXY-EXT-', 'KPROXY-SVC-', 'KPROXY-SVL-', ENDPOINT_CHAIN_PREFIX];

function rank(chain: string): number {
  return REFERRER_ORDER.findIndex((prefix) => chain.startsWith(prefix));
}

export function cleanupInputs(table: IptablesTable, saved: string, maxChains: number): string[] {
  const ours = savedChainNames(saved).filter(isKproxyChain);
  const jumps = jumpsInto(saved, isKproxyChain);
  if (ours.length === 0 && jumps.length === 0) return [];
  if (ours.length <= maxChains) return [removalInput(table, ours, jumps)];
  const topLevel = ours.filter((chain) => !isServiceChain(chain));
  const services = ours.filter(isServiceChain).sort((a, b) => rank(a) - rank(b) || compareText(a, b));
  const inputs = [
    restoreSection(table, [...topLevel.map((c) => `:${c} - [0:0]`), ...jumps.map((j) => `-D${j.slice(2)}`)]),
  ];
  for (let start = 0; start < services.length; start += maxChains) {
    const part = services.slice(start, start + maxChains);
    inputs.push(restoreSection(table, [...part.map((c) => `:${c} - [0:0]`), ...part.map((c) => `-X ${c}`)]));
  }
  inputs.push(
    restoreSection(
      table,
      topLevel.map((c) => `-X ${c}`),
    ),
  );
  return inputs;
}
