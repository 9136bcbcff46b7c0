// The full sync: replace each family's table with its desired ruleset in one transaction.
// `add table; delete table` first makes the script work whether or not the table exists (and
// removes a table of a family that has no state any more). The whole script is one nft
// transaction, so packets see the old ruleset or the new one, never a mix; established
// connections keep their conntrack NAT bindings across it.
import type { DualStackState } from '../../src/model/proxy-state.ts';
import { baseBuilder } from './desired-ruleset.ts';
import { familySyntax } from './family-syntax.ts';
import { type DesiredRuleset, FAMILIES, type FamilyRuleset, type RulesetBuilder } from './ruleset.ts';
import { addServicePort, CROSS_PORT_SETS } from './service-port.ts';
import { NftTransaction, TABLE } from './transaction.ts';

export const TABLE_COMMENT = 'kproxy: Kubernetes service proxy (managed by kproxy; do not edit)';

/** Adds every object of a family's ruleset to `tx` (the table must not exist yet). */
export function defineFamily(tx: NftTransaction, ruleset: FamilyRuleset): void {
  const family = ruleset.family;
  tx.addTable(family, TABLE_COMMENT);
  addObjects(tx, ruleset);
}

/** Adds a ruleset's objects to an existing table: sets, chains, their rules, then elements. */
function addObjects(tx: NftTransaction, ruleset: FamilyRuleset): void {
  const family = ruleset.family;
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

/**
 * The full ruleset of `state` for a kernel WITHOUT our tables (a cold start), built and rendered in
 * pieces so that neither kproxy nor nft ever holds the whole of it: first every table with the
 * objects that depend on the node only, then one transaction per run of service ports with about
 * `maxElements` elements (their sets, chains, rules and elements; a port is never split). Each
 * transaction is atomic, so every prefix of the sequence is the full ruleset of the first service
 * ports: no service is reachable half-built. Lazy: a piece is garbage once it has been written.
 * Yields undefined after each service port: a point where the caller may give way (work-slices.ts).
 */
export function* coldStartTransactions(
  state: DualStackState,
  maxElements: number,
): Generator<NftTransaction | undefined, void, void> {
  const families = (['IPv4', 'IPv6'] as const).flatMap((ipFamily) => {
    const familyState = state[ipFamily];
    if (!familyState) return [];
    const syntax = familySyntax(ipFamily);
    return [{ state: familyState, syntax, builder: baseBuilder(familyState.node, syntax) }];
  });
  const structure = new NftTransaction();
  for (const family of FAMILIES) structure.addTable(family).deleteTable(family);
  for (const { builder } of families) defineFamily(structure, builder.drain(CROSS_PORT_SETS));
  yield structure;
  for (const { state: familyState, syntax, builder } of families) {
    for (const sp of familyState.servicePorts.values()) {
      addServicePort(builder, syntax, familyState.node, sp);
      yield builder.pendingElements >= maxElements ? piece(builder) : undefined;
    }
    if (builder.pendingElements > 0) yield piece(builder);
  }
}

function piece(builder: RulesetBuilder): NftTransaction {
  const tx = new NftTransaction();
  addObjects(tx, builder.drain(CROSS_PORT_SETS));
  return tx;
}
