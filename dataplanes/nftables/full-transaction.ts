// The full sync: replace each family's table with its desired ruleset in one transaction.
// `add table; delete table` first makes the script work whether or not the table exists (and
// removes a table of a family that has no state any more). The whole script is one nft
// transaction, so packets see the old ruleset or the new one, never a mix; established
// connections keep their conntrack NAT bindings across it.
import { type DesiredRuleset, FAMILIES, type FamilyRuleset } from './ruleset.ts';
import { type ElementSpec, NftTransaction, TABLE } from './transaction.ts';

export const TABLE_COMMENT = 'kproxy: Kubernetes service proxy (managed by kproxy; do not edit)';

/** Adds every object of a family's ruleset to `tx` (the table must not exist yet). */
export function defineFamily(tx: NftTransaction, ruleset: FamilyRuleset): void {
  const family = ruleset.family;
  tx.addTable(family, TABLE_COMMENT);
  for (const set of ruleset.sets.values()) tx.addSet(family, set);
  // Declare every chain before any rule, so rules can jump to chains defined later.
  for (const chain of ruleset.chains.values()) tx.addChain(family, chain);
  for (const chain of ruleset.chains.values()) {
    for (const rule of chain.rules) tx.addRule(family, chain.name, rule);
  }
  for (const [set, elements] of ruleset.elements) tx.addElements(family, set, [...elements.values()]);
}

export function fullTransaction(desired: DesiredRuleset, table = TABLE): NftTransaction {
  const tx = new NftTransaction(table);
  for (const family of FAMILIES) {
    tx.addTable(family).deleteTable(family);
    const ruleset = desired[family];
    if (ruleset) defineFamily(tx, ruleset);
  }
  return tx;
}

/** Maps that make a service reachable: filled last, so no service is reachable half-built. */
const REACHABILITY_MAPS = ['service-ips', 'service-nodeports'];

/**
 * The full ruleset for a kernel WITHOUT our tables (a cold start), as a sequence of transactions
 * of at most `maxElements` elements each, which keeps nft's memory bounded at scale: first every
 * table, set, chain and rule, then the elements, those of the maps that make a service reachable
 * last. Every prefix of the sequence is a consistent ruleset in which each service is either
 * complete or not reachable at all.
 */
export function coldStartTransactions(desired: DesiredRuleset, maxElements: number): NftTransaction[] {
  const structure = fullTransaction(
    Object.fromEntries(
      FAMILIES.flatMap((f) => {
        const r = desired[f];
        return r ? [[f, { ...r, elements: new Map([...r.elements.keys()].map((k) => [k, new Map()])) }]] : [];
      }),
    ),
  );
  const transactions = [structure];
  let current = new NftTransaction();
  let size = 0;
  const add = (family: FamilyRuleset['family'], set: string, elements: readonly ElementSpec[]) => {
    for (let i = 0; i < elements.length; ) {
      if (size === maxElements) {
        transactions.push(current);
        current = new NftTransaction();
        size = 0;
      }
      const take = elements.slice(i, i + maxElements - size);
      current.addElements(family, set, take);
      size += take.length;
      i += take.length;
    }
  };
  for (const last of [false, true]) {
    for (const family of FAMILIES) {
      for (const [set, elements] of desired[family]?.elements ?? []) {
        if (REACHABILITY_MAPS.includes(set) === last) add(family, set, [...elements.values()]);
      }
    }
  }
  if (!current.empty) transactions.push(current);
  return transactions;
}
