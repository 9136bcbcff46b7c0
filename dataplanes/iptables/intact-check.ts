// The iptables intact check beyond the canaries: a table read back with iptables-save and compared
// with the record of what kproxy committed, each of its chains at its rule count and each jump from
// a built-in chain in place. It finds what a canary cannot: one chain flushed or deleted, a rule
// deleted from or added to one of ours, a jump removed.
//
// Reading a table costs what the tables hold, measured at 10k services × 10 endpoints (nat: 320k
// rules, 34 MB of text) on a 2-core machine at load ~15: iptables-legacy-save -t nat 13 s,
// filter and mangle 0.3 s; iptables-nft-save 15-20 s for any table (it reads every table
// whatever -t says). So each table is read at most a share of the time (DumpPacer): at every check
// on a small node, every few minutes at 30k services, beside the sync loop (live.ts); the canaries
// are still asked every time.
import type { Steps } from '../../contract/base/work-slices.ts';
import { isKproxyChain } from './chain-names.ts';
import { jumpsOf } from './jump-rules.ts';
import type { IptablesTable } from './plan-types.ts';

/** Share of the time a check may spend reading tables back (after a read of t, none for t × 9). */
export const DEFAULT_DUMP_SHARE = 0.1;

/** When each table may be read back again, so that reading stays within a share of the time. */
export class DumpPacer {
  readonly #share: number;
  readonly #now: () => number;
  readonly #nextAt = new Map<string, number>();

  constructor(share = DEFAULT_DUMP_SHARE, now: () => number = () => performance.now()) {
    this.#share = share;
    this.#now = now;
  }

  due(key: string): boolean {
    return (this.#nextAt.get(key) ?? Number.NEGATIVE_INFINITY) <= this.#now();
  }

  /** Times `read`: the next read of `key` waits so that reads take at most the share. */
  async timed<T>(key: string, read: () => Promise<T>): Promise<T> {
    const started = this.#now();
    try {
      return await read();
    } finally {
      const ended = this.#now();
      this.#nextAt.set(key, ended + (ended - started) * (1 / this.#share - 1));
    }
  }
}

/**
 * What differs between `saved` (iptables-save of `table`) and what kproxy committed there:
 * `expected` is rules per "table/chain" (the live dataplane's record, every table). Undefined when
 * every chain of `table` holds its rules and every jump into them is there; chains the record
 * does not know (another program's, or ours on their way out) are not looked at.
 */
export function* savedTableDamage(
  table: IptablesTable,
  saved: string,
  expected: ReadonlyMap<string, number>,
): Steps<string | undefined> {
  const declared = new Set<string>();
  const rules = new Map<string, number>();
  /** "FROM TO" of each rule in another chain (a built-in one) that jumps to one of ours. */
  const jumps = new Set<string>();
  // Line by line without splitting: at 30k services the nat table is ~1.3M lines, ~100 MB.
  // Steps every 1,000 lines (~1 ms): the daemon reads in slices (30k services: ~1 s in all).
  for (let at = 0, line = 0; at < saved.length; line++) {
    if (line % 1000 === 999) yield;
    let end = saved.indexOf('\n', at);
    if (end < 0) end = saved.length;
    if (saved.startsWith(':', at)) declared.add(saved.slice(at + 1, saved.indexOf(' ', at)));
    else if (saved.startsWith('-A ', at)) {
      const chain = saved.slice(at + 3, saved.indexOf(' ', at + 3));
      if (isKproxyChain(chain)) rules.set(chain, (rules.get(chain) ?? 0) + 1);
      else {
        const target = /-j (KPROXY-\S+)$/.exec(saved.slice(at, end))?.[1];
        if (target !== undefined) jumps.add(`${chain} ${target}`);
      }
    }
    at = end + 1;
  }
  const prefix = `${table}/`;
  for (const [key, count] of expected) {
    if (!key.startsWith(prefix)) continue;
    const chain = key.slice(prefix.length);
    if (!declared.has(chain)) return `${table} chain ${chain} is missing`;
    const found = rules.get(chain) ?? 0;
    if (found !== count) return `${table} chain ${chain} holds ${found} rules, ${count} committed`;
  }
  for (const { from, spec } of jumpsOf(table)) {
    const to = spec[spec.length - 1]!;
    if (expected.has(`${prefix}${to}`) && !jumps.has(`${from} ${to}`))
      return `${table} jump from ${from} to ${to} is missing`;
  }
  return undefined;
}
