// The intact check's scripts, shared by the nftables table and the IPVS companion table: `nft -c`
// transactions the kernel accepts only when every expected chain, rule and element is there with
// its value (see dataplanes/nftables/intact-check.ts for why check-mode transactions).
import { CANARY_SET, type FamilyRuleset } from './ruleset.ts';
import { type NftFamily, NftTransaction, TABLE } from './transaction.ts';

/** What one check expects in a family's table: rules per chain and elements (key → map value). */
export interface ExpectedObjects {
  readonly family: NftFamily;
  readonly ruleCounts: ReadonlyMap<string, number>;
  readonly elements: ReadonlyMap<string, ReadonlyMap<string, string | undefined>>;
}

/** Collects expected rule counts and elements from rulesets. */
export class Expected {
  readonly ruleCounts = new Map<string, number>();
  readonly elements = new Map<string, Map<string, string | undefined>>();
  count = 0;

  /** Adds what a ruleset holds. */
  add(ruleset: FamilyRuleset): void {
    for (const chain of ruleset.chains.values()) {
      this.ruleCounts.set(chain.name, Math.max(this.ruleCounts.get(chain.name) ?? 0, chain.rules.length));
    }
    for (const [set, elements] of ruleset.elements) {
      if (elements.size === 0) continue;
      const expected = this.elements.get(set) ?? new Map<string, string | undefined>();
      this.elements.set(set, expected);
      for (const element of elements.values()) {
        if (!expected.has(element.key)) this.count++;
        expected.set(element.key, element.value);
      }
    }
  }
}

/**
 * What a check expects of a small table (the IPVS companion): every chain with its rules, and the
 * first element of each set that has any (enough to find a flushed set).
 */
export function firstOfEachSet(ruleset: FamilyRuleset): ExpectedObjects {
  const expected = new Expected();
  const firsts = new Map(
    [...ruleset.elements].map(([set, elements]) => [set, new Map([...elements].slice(0, 1))]),
  );
  expected.add({ ...ruleset, elements: firsts });
  return { family: ruleset.family, ...expected };
}

interface ScriptOptions {
  /** The canary must hold it (the nftables table; the IPVS companion has no canary). */
  readonly nonce?: number;
  readonly table?: string;
}

/**
 * The `nft -c` script that the kernel accepts only when everything expected is there (each chain
 * with at least its rules, each element), and the canary holds `nonce` when one is given.
 * `delete element` of a concatenated range (the interval sets, firewall-allow) is refused only
 * when no element covers its start: a range deleted or its set flushed is found, a narrowed one not.
 */
export function intactCheckScript(expected: readonly ExpectedObjects[], options: ScriptOptions = {}): string {
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
        [...keys.keys()].map((key) => ({ key })),
      );
  }
  return tx.toString() + rules.join('');
}

/**
 * The `nft -c` script that the kernel refuses when a map element holds another value than
 * expected: adding an element that exists with the same value is a no-op, with another one a
 * clash ("File exists"). A missing element is added, so this complements intactCheckScript, which
 * runs first. Undefined when nothing expected has a value.
 */
export function intactValuesScript(
  expected: readonly ExpectedObjects[],
  options: ScriptOptions = {},
): string | undefined {
  const tx = new NftTransaction(options.table ?? TABLE);
  let values = 0;
  for (const { family, elements } of expected) {
    if (options.nonce !== undefined) tx.deleteElements(family, CANARY_SET, [{ key: `${options.nonce}` }]);
    for (const [set, keys] of elements) {
      const mapped = [...keys].flatMap(([key, value]) => (value === undefined ? [] : [{ key, value }]));
      values += mapped.length;
      if (mapped.length > 0) tx.addElements(family, set, mapped);
    }
  }
  return values === 0 ? undefined : tx.toString();
}

/**
 * The `nft -c` script the kernel refuses when `chain` holds at most `count` rules (there is no rule
 * at index `count`): accepted, it says someone added a rule to the chain.
 */
export function extraRuleScript(family: NftFamily, chain: string, count: number, table = TABLE): string {
  return `insert rule ${family} ${table} ${chain} index ${count} counter\n`;
}
