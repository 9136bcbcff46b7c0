// A table's full transaction in three steps, for a kernel that does not hold the table yet: no
// packet meets a table's sets, chains or elements until a base chain (a hook) of it refers to
// them, so the table, its sets and its regular chains with their rules go first, then every
// element, in as many transactions as suit the writer (nothing sees them yet: splitting them
// breaks no atomicity a packet could notice), and the base chains with their rules last, in one
// transaction: packets meet the whole table at once. Joined, the three are one transaction, the
// atomic replace of a table that is there.
import { addChains, TABLE_COMMENT } from './full-transaction.ts';
import { type DesiredRuleset, FAMILIES } from './ruleset.ts';
import { NftTransaction } from './transaction.ts';

export interface HooksLast {
  /** Per family `add table; delete table`, then its table, sets, regular chains and their rules. */
  readonly structure: NftTransaction;
  /** Every element of the desired sets and maps. */
  readonly elements: NftTransaction;
  /** The base chains and their rules. */
  readonly hooks: NftTransaction;
}

export function hooksLastTransactions(desired: DesiredRuleset, table: string): HooksLast {
  const structure = new NftTransaction(table);
  const elements = new NftTransaction(table);
  const hooks = new NftTransaction(table);
  for (const family of FAMILIES) {
    // As fullTransaction: the table goes whether or not it was there, and a family without state
    // keeps none.
    structure.addTable(family).deleteTable(family);
    const ruleset = desired[family];
    if (!ruleset) continue;
    structure.addTable(family, TABLE_COMMENT);
    for (const set of ruleset.sets.values()) structure.addSet(family, set);
    const chains = [...ruleset.chains.values()];
    addChains(
      structure,
      family,
      chains.filter((chain) => chain.base === undefined),
    );
    for (const [set, members] of ruleset.elements) elements.addElements(family, set, [...members.values()]);
    addChains(
      hooks,
      family,
      chains.filter((chain) => chain.base !== undefined),
    );
  }
  return { structure, elements, hooks };
}

/** The three steps as one transaction. */
export function joinedTransaction({ structure, elements, hooks }: HooksLast): NftTransaction {
  const whole = new NftTransaction(structure.table);
  for (const part of [structure, elements, hooks]) for (const op of part.ops) whole.push(op);
  return whole;
}
