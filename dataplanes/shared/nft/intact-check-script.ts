// The intact check's script, shared by the nftables table and the IPVS companion table: an
// `nft -c` transaction the kernel accepts only when every expected chain, rule and element is
// there (see dataplanes/nftables/intact-check.ts for why a check-mode transaction).
import { CANARY_SET, type FamilyRuleset } from './ruleset.ts';
import { type NftFamily, NftTransaction, TABLE } from './transaction.ts';

/** What one check expects in a family's table: rules per chain (at least) and element keys. */
export interface ExpectedObjects {
  readonly family: NftFamily;
  readonly ruleCounts: ReadonlyMap<string, number>;
  readonly elements: ReadonlyMap<string, ReadonlySet<string>>;
}

/** Collects expected rule counts and element keys from rulesets. */
export class Expected {
  readonly ruleCounts = new Map<string, number>();
  readonly elements = new Map<string, Set<string>>();
  count = 0;

  /** Adds what a ruleset holds, but no elements of `skipped` sets. */
  add(ruleset: FamilyRuleset, skipped: ReadonlySet<string>): void {
    for (const chain of ruleset.chains.values()) {
      this.ruleCounts.set(chain.name, Math.max(this.ruleCounts.get(chain.name) ?? 0, chain.rules.length));
    }
    for (const [set, elements] of ruleset.elements) {
      if (skipped.has(set) || elements.size === 0) continue;
      const keys = this.elements.get(set) ?? new Set<string>();
      this.elements.set(set, keys);
      for (const key of elements.keys()) {
        if (!keys.has(key)) this.count++;
        keys.add(key);
      }
    }
  }
}

/** A ruleset's interval sets: a check leaves their elements out (nft needs every element in its cache to delete a range). */
export function intervalSets(ruleset: FamilyRuleset): Set<string> {
  return new Set([...ruleset.sets.values()].filter((s) => s.flags?.includes('interval')).map((s) => s.name));
}

/**
 * What a check expects of a small table (the IPVS companion): every chain with its rules, and the
 * first element of each set that has any (enough to find a flushed set).
 */
export function firstOfEachSet(ruleset: FamilyRuleset): ExpectedObjects {
  const expected = new Expected();
  const skipped = intervalSets(ruleset);
  const firsts = new Map(
    [...ruleset.elements].map(([set, elements]) => [set, new Map([...elements].slice(0, 1))]),
  );
  expected.add({ ...ruleset, elements: firsts }, skipped);
  return { family: ruleset.family, ...expected };
}

/**
 * The `nft -c` script that the kernel accepts only when everything expected is there, and the
 * canary holds `nonce` when one is given.
 */
export function intactCheckScript(
  expected: readonly ExpectedObjects[],
  options: { readonly nonce?: number; readonly table?: string } = {},
): string {
  const table = options.table ?? TABLE;
  const tx = new NftTransaction(table);
  const rules: string[] = [];
  for (const { family, ruleCounts, elements } of expected) {
    if (options.nonce !== undefined) tx.deleteElements(family, CANARY_SET, [{ key: `${options.nonce}` }]);
    for (const [chain, count] of ruleCounts) {
      if (count > 0) rules.push(`insert rule ${family} ${table} ${chain} index ${count - 1} counter\n`);
    }
    for (const [set, keys] of elements)
      tx.deleteElements(
        family,
        set,
        [...keys].map((key) => ({ key })),
      );
  }
  return tx.toString() + rules.join('');
}
