// The full ruleset of a cold start, written in pieces (see coldStartTransactions).
import type { DualStackState } from '../../contract/proxy-state.ts';
import { familySyntax } from '../shared/nft/family-syntax.ts';
import { addObjects, defineFamily } from '../shared/nft/full-transaction.ts';
import { FAMILIES, type RulesetBuilder } from '../shared/nft/ruleset.ts';
import { NftTransaction } from '../shared/nft/transaction.ts';
import { baseBuilder } from './desired-ruleset.ts';
import { addServicePort } from './service-port.ts';
import { CROSS_PORT_SETS } from './sets.ts';

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
