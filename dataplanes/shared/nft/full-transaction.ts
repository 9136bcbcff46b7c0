// The full sync: replace each family's table with its desired ruleset in one transaction.
// `add table; delete table` first makes the script work whether or not the table exists (and
// removes a table of a family that has no state any more). The whole script is one nft
// transaction, so packets see the old ruleset or the new one, never a mix; established
// connections keep their conntrack NAT bindings across it.
import { type DesiredRuleset, FAMILIES, type FamilyRuleset } from './ruleset.ts';
import { type ChainSpec, type NftFamily, NftTransaction, TABLE } from './transaction.ts';

export const TABLE_COMMENT = 'kproxy: Kubernetes service proxy (managed by kproxy; do not edit)';

/** Adds every object of a family's ruleset to `tx` (the table must not exist yet). */
export function defineFamily(tx: NftTransaction, ruleset: FamilyRuleset): void {
  const family = ruleset.family;
  tx.addTable(family, TABLE_COMMENT);
  addObjects(tx, ruleset);
}

/** Adds a ruleset's objects to an existing table: sets, chains, their rules, then elements. */
export function addObjects(tx: NftTransaction, ruleset: FamilyRuleset): void {
  const family = ruleset.family;
  for (const set of ruleset.sets.values()) tx.addSet(family, set);
  addChains(tx, family, [...ruleset.chains.values()]);
  for (const [set, elements] of ruleset.elements) tx.addElements(family, set, [...elements.values()]);
}

/** Adds `chains`, every one declared before any rule, so rules can jump to chains defined later. */
export function addChains(tx: NftTransaction, family: NftFamily, chains: readonly ChainSpec[]): void {
  for (const chain of chains) tx.addChain(family, chain);
  for (const chain of chains) {
    for (const rule of chain.rules) tx.addRule(family, chain.name, rule);
  }
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
