// The intact check: a cheap, bounded question to the kernel that fails when someone deleted or
// flushed our table, a chain, rules, a set or map, or elements (see the README's "Intact check").
//
// nft 1.0.6 answers `list table`, `list chain` and `get element` only after fetching every element
// of the table (seconds at 30k services), but a check-mode transaction (`nft -c`) is answered by
// the kernel without that: ~10 ms, plus ~35 us per element named. The script asks for
// - the canary element holding the last full sync's nonce (the table is ours and not replaced);
// - `insert rule ... index N-1` in each chain that should hold N rules: refused when the chain is
//   missing or holds fewer (flushed, a rule deleted);
// - `delete element` of expected keys: refused when one is missing (a set or map flushed, an
//   element deleted).
// Chains and elements that depend on the node only are checked every time; service ports' own
// elements and chains in turns of about `budget` elements, so every element is checked within
// (elements / budget) checks, plus the ports last seen filling each set ("witnesses"), so that a
// flushed set is found by the next check whatever the turn.
import type { NodeSettings, ProxyState, ServicePort, ServicePortKey } from '../../src/model/proxy-state.ts';
import { CANARY_SET } from './base-objects.ts';
import { baseBuilder } from './desired-ruleset.ts';
import { familySyntax } from './family-syntax.ts';
import { type FamilyRuleset, RulesetBuilder } from './ruleset.ts';
import { addServicePort } from './service-port.ts';
import { type NftFamily, NftTransaction, TABLE } from './transaction.ts';

/** Elements of service ports checked per intact() call and family: ~35 ms of nft. */
export const CHECK_BUDGET = 1000;

/** What one check expects in a family's table: rules per chain (at least) and element keys. */
export interface ExpectedObjects {
  readonly family: NftFamily;
  readonly ruleCounts: ReadonlyMap<string, number>;
  readonly elements: ReadonlyMap<string, ReadonlySet<string>>;
}

function ipFamily(family: NftFamily) {
  return family === 'ip' ? 'IPv4' : 'IPv6';
}

/** What one service port adds to its family's table on its own. */
function servicePortRuleset(family: NftFamily, node: NodeSettings, sp: ServicePort): FamilyRuleset {
  const builder = new RulesetBuilder(family, { open: true });
  addServicePort(builder, familySyntax(ipFamily(family)), node, sp);
  return builder.build();
}

class Expected {
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

/**
 * Chooses what each check of a family verifies, in turns through the service ports. Only for a
 * state whose ports do not collide (a fragment index exists): then each port's own ruleset is
 * exactly what it has in the table.
 */
export class IntactSampler {
  readonly #cursor = new Map<NftFamily, number>();
  /** Per family and set: the port last seen adding elements to it. */
  readonly #witnesses = new Map<NftFamily, Map<string, ServicePortKey>>();
  readonly #budget: number;

  constructor(budget = CHECK_BUDGET) {
    this.#budget = budget;
  }

  /** The node's fixed objects, plus service ports' when `withPorts` (their turn, and witnesses). */
  next(family: NftFamily, state: ProxyState, withPorts: boolean): ExpectedObjects {
    const base = baseBuilder(state.node, familySyntax(ipFamily(family))).build();
    // Interval sets are left out: nft needs every element in its cache to delete a range.
    const skipped = new Set(
      [...base.sets.values()].filter((s) => s.flags?.includes('interval')).map((s) => s.name),
    );
    const expected = new Expected();
    expected.add(base, skipped);
    if (!withPorts) return { family, ...expected };
    const witnesses = this.#witnesses.get(family) ?? new Map<string, ServicePortKey>();
    this.#witnesses.set(family, witnesses);
    const seen = new Set<ServicePortKey>();
    const take = (sp: ServicePort): void => {
      if (seen.has(sp.key)) return;
      seen.add(sp.key);
      const ruleset = servicePortRuleset(family, state.node, sp);
      for (const [set, elements] of ruleset.elements) if (elements.size > 0) witnesses.set(set, sp.key);
      expected.add(ruleset, skipped);
    };
    for (const key of new Set(witnesses.values())) {
      const sp = state.servicePorts.get(key);
      if (sp) take(sp);
    }
    const ports = [...state.servicePorts.values()];
    let cursor = this.#cursor.get(family) ?? 0;
    if (cursor >= ports.length) cursor = 0;
    const start = cursor;
    const baseCount = expected.count;
    do {
      if (ports.length === 0) break;
      take(ports[cursor]!);
      cursor = (cursor + 1) % ports.length;
    } while (cursor !== start && expected.count - baseCount < this.#budget);
    this.#cursor.set(family, cursor);
    return { family, ...expected };
  }
}

/**
 * What a check expects of a small table (the IPVS companion): every chain with its rules, and the
 * first element of each set that has any (enough to find a flushed set).
 */
export function firstOfEachSet(ruleset: FamilyRuleset): ExpectedObjects {
  const expected = new Expected();
  const skipped = new Set(
    [...ruleset.sets.values()].filter((s) => s.flags?.includes('interval')).map((s) => s.name),
  );
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
