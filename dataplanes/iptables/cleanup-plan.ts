// The restore inputs that remove everything kproxy owns in one table, from its iptables-save
// output: every rule of a foreign chain that jumps into a KPROXY chain, then every KPROXY chain.
// Like restore-chunks.ts, large removals go in parts (iptables-nft-restore is quadratic in the
// chains one input declares): first the jumps and the top-level chains' rules, which leaves the
// service chains referenced only by each other; then the service chains, referrers before the
// chains they jump to (FW → EXT → SVC/SVL → SEP); then the empty top-level chains. The pieces
// that do not depend on kproxy's chain names also remove kube-proxy's leftovers
// (src/daemon/kube-proxy-leftovers.ts).
import { isKproxyChain, isServiceChain } from './chain-names.ts';
import type { IptablesTable } from './restore-plan.ts';

const REFERRER_ORDER = ['KPROXY-FW-', 'KPROXY-EXT-', 'KPROXY-SVC-', 'KPROXY-SVL-', 'KPROXY-SEP-'];

function rank(chain: string): number {
  return REFERRER_ORDER.findIndex((prefix) => chain.startsWith(prefix));
}

/** Chain names declared in iptables-save output (":NAME POLICY [p:b]"). */
export function savedChainNames(saved: string): string[] {
  return saved
    .split('\n')
    .filter((line) => line.startsWith(':'))
    .map((line) => line.slice(1).split(' ')[0]!);
}

/** The rules (iptables-save "-A" lines) of chains not `owned` that jump or go to an owned chain. */
export function jumpsInto(saved: string, owned: (chain: string) => boolean): string[] {
  return saved.split('\n').filter((line) => {
    const words = line.split(' ');
    if (words[0] !== '-A' || owned(words[1] ?? '')) return false;
    return words.some((word, i) => (word === '-j' || word === '-g') && owned(words[i + 1] ?? ''));
  });
}

/** One restore input that deletes `jumps`, then flushes and deletes `chains`. */
export function removalInput(table: string, chains: readonly string[], jumps: readonly string[]): string {
  return section(table, [
    ...chains.map((c) => `:${c} - [0:0]`),
    ...jumps.map((j) => `-D${j.slice(2)}`),
    ...chains.map((c) => `-X ${c}`),
  ]);
}

function section(table: string, body: readonly string[]): string {
  return [`*${table}`, ...body, 'COMMIT', ''].join('\n');
}

export function cleanupInputs(table: IptablesTable, saved: string, maxChains: number): string[] {
  const ours = savedChainNames(saved).filter(isKproxyChain);
  const jumps = jumpsInto(saved, isKproxyChain);
  if (ours.length === 0 && jumps.length === 0) return [];
  if (ours.length <= maxChains) return [removalInput(table, ours, jumps)];
  const topLevel = ours.filter((chain) => !isServiceChain(chain));
  const services = ours.filter(isServiceChain).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
  const inputs = [
    section(table, [...topLevel.map((c) => `:${c} - [0:0]`), ...jumps.map((j) => `-D${j.slice(2)}`)]),
  ];
  for (let start = 0; start < services.length; start += maxChains) {
    const part = services.slice(start, start + maxChains);
    inputs.push(section(table, [...part.map((c) => `:${c} - [0:0]`), ...part.map((c) => `-X ${c}`)]));
  }
  inputs.push(
    section(
      table,
      topLevel.map((c) => `-X ${c}`),
    ),
  );
  return inputs;
}
