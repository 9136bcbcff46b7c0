// Reading iptables-save output, and the restore input that removes chains from it: shared by the
// iptables dataplane's cleanup (dataplanes/iptables/cleanup-plan.ts) and the removal of what an
// upstream kube-proxy left behind (kube-proxy-leftovers.ts), which differ only in whose chains.

import { compareText } from '../../contract/base/compare-text.ts';

/** Chain names declared in iptables-save output (":NAME POLICY [p:b]"). */
export function savedChainNames(saved: string): string[] {
  return saved
    .split('\n')
    .filter((line) => line.startsWith(':'))
    .map((line) => line.slice(1).split(' ')[0]!);
}

/**
 * The first chain a removal input (removalInputs) flushes or deletes: while its removal has work
 * to do, the table's save declares it with this line (a chain of ours has no policy or counters).
 */
export function firstChainLine(input: string): string | undefined {
  for (const line of input.split('\n')) {
    if (line.startsWith(':')) return line;
    if (line.startsWith('-X ')) return `:${line.slice(3)} - [0:0]`;
  }
  return undefined;
}

/** The rules (iptables-save "-A" lines) of chains not `owned` that jump or go to an owned chain. */
export function jumpsInto(saved: string, owned: (chain: string) => boolean): string[] {
  return saved.split('\n').filter((line) => {
    const words = line.split(' ');
    if (words[0] !== '-A' || owned(words[1] ?? '')) return false;
    return words.some((word, i) => (word === '-j' || word === '-g') && owned(words[i + 1] ?? ''));
  });
}

/**
 * The restore inputs that remove the `owned` chains of one table, given its iptables-save output,
 * and every rule of another chain that jumps into one. Large removals go in parts of at most
 * `maxChains` per-service chains (iptables-nft-restore is quadratic in the chains one input
 * declares; restore-chunks.ts): first the jumps and the top-level chains' rules, which leaves the
 * per-service chains (those named by a prefix in `referrerOrder`) referenced only by each other;
 * then those, referrers before the chains they jump to (the prefixes' order); then the empty
 * top-level chains. Every part leaves every reference valid.
 */
export function removalInputs(
  table: string,
  saved: string,
  owned: (chain: string) => boolean,
  referrerOrder: readonly string[],
  maxChains: number,
): string[] {
  const chains = savedChainNames(saved).filter(owned);
  const jumps = jumpsInto(saved, owned);
  if (chains.length === 0 && jumps.length === 0) return [];
  if (chains.length <= maxChains) return [removalInput(table, chains, jumps)];
  const rank = (chain: string) => referrerOrder.findIndex((prefix) => chain.startsWith(prefix));
  const topLevel = chains.filter((chain) => rank(chain) < 0);
  const services = chains
    .filter((chain) => rank(chain) >= 0)
    .sort((a, b) => rank(a) - rank(b) || compareText(a, b));
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

/** One restore input that deletes `jumps`, then flushes and deletes `chains`. */
export function removalInput(table: string, chains: readonly string[], jumps: readonly string[]): string {
  return restoreSection(table, [
    ...chains.map((c) => `:${c} - [0:0]`),
    ...jumps.map((j) => `-D${j.slice(2)}`),
    ...chains.map((c) => `-X ${c}`),
  ]);
}

/** One table's section of a restore input. */
export function restoreSection(table: string, body: readonly string[]): string {
  return [`*${table}`, ...body, 'COMMIT', ''].join('\n');
}
