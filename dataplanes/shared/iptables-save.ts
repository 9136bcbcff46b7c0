// Reading iptables-save output, and the restore input that removes chains from it: shared by the
// iptables dataplane's cleanup (dataplanes/iptables/cleanup-plan.ts) and the removal of what an
// upstream kube-proxy left behind (kube-proxy-leftovers.ts), which differ only in whose chains.

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
