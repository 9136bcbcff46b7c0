// The nftables intact check (the scripts: ../shared/nft/intact-check-script.ts): cheap, bounded
// questions to the kernel that fail when someone deleted or flushed our table, a chain, rules, a
// set or map, or elements, changed an element's value or added a rule to one of our chains (see
// the README's "Intact check").
//
// nft 1.0.6 answers `list table`, `list chain` and `get element` only after fetching every element
// of the table (seconds at 30k services), but a check-mode transaction (`nft -c`) is answered by
// the kernel without that: ~10 ms, plus ~35 us per element named. A check asks
// - the canary element holding the last full sync's nonce (the table is ours and not replaced);
// - `insert rule ... index N-1` in each chain that should hold N rules: refused when the chain is
//   missing or holds fewer (flushed, a rule deleted);
// - `delete element` of expected keys: refused when one is missing (a set or map flushed, an
//   element deleted), then `add element` of the same keys with their values in a second
//   transaction: refused when a map element holds another value;
// - `insert rule ... index N` in a few chains, in turns, one transaction each: accepted only
//   when someone added a rule (nft -c says yes or no for a whole transaction, so one per chain).
// Chains and elements that depend on the node only are checked every time; service ports' own
// elements and chains in turns of about `budget` elements, so every element is checked within
// (elements / budget) checks, plus the ports last seen filling each set ("witnesses"), so that a
// flushed set is found by the next check whatever the turn.
import type { NodeSettings, ProxyState, ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import { familySyntax } from '../shared/nft/family-syntax.ts';
import { Expected, type ExpectedObjects, extraRuleScript } from '../shared/nft/intact-check-script.ts';
import { type FamilyRuleset, RulesetBuilder } from '../shared/nft/ruleset.ts';
import type { NftFamily } from '../shared/nft/transaction.ts';
import { baseBuilder } from './desired-ruleset.ts';
import type { SlotTable } from './endpoint-slots.ts';
import { addServicePort } from './service-port.ts';

/** Elements of service ports checked per intact() call and family: ~35 ms of nft. */
export const CHECK_BUDGET = 1000;

/** Chains asked per intact() call and family whether a rule was added: one nft -c each. */
export const EXTRA_RULE_PROBES = 2;

function ipFamily(family: NftFamily) {
  return family === 'ip' ? 'IPv4' : 'IPv6';
}

/** What one service port adds to its family's table on its own, its endpoints at their slots. */
function servicePortRuleset(
  family: NftFamily,
  node: NodeSettings,
  sp: ServicePort,
  slots: SlotTable,
): FamilyRuleset {
  const builder = new RulesetBuilder(family, { open: true });
  addServicePort(builder, familySyntax(ipFamily(family)), node, sp, slots.get(sp.key));
  return builder.build();
}

/**
 * Chooses what each check of a family verifies, in turns through the service ports. Only for a
 * state with a fragment index (its ports share no object they spell differently): then each
 * port's own ruleset is exactly what it has in the table.
 */
export class IntactSampler {
  readonly #cursor = new Map<NftFamily, number>();
  /** Per family and set: the port last seen adding elements to it. */
  readonly #witnesses = new Map<NftFamily, Map<string, ServicePortKey>>();
  /** Per family, the chain last asked whether a rule was added (chains go in name order). */
  readonly #lastProbed = new Map<NftFamily, string>();
  readonly #budget: number;

  constructor(budget = CHECK_BUDGET) {
    this.#budget = budget;
  }

  /**
   * The node's fixed objects, plus service ports' (their turn, and witnesses) when given where
   * their endpoints are (`slots`: the live record's, endpoint-slots.ts).
   */
  next(family: NftFamily, state: ProxyState, slots: SlotTable | undefined): ExpectedObjects {
    const base = baseBuilder(state.node, familySyntax(ipFamily(family))).build();
    const expected = new Expected();
    expected.add(base);
    if (!slots) return { family, ...expected };
    const witnesses = this.#witnesses.get(family) ?? new Map<string, ServicePortKey>();
    this.#witnesses.set(family, witnesses);
    const seen = new Set<ServicePortKey>();
    const take = (sp: ServicePort): void => {
      if (seen.has(sp.key)) return;
      seen.add(sp.key);
      const ruleset = servicePortRuleset(family, state.node, sp, slots);
      for (const [set, elements] of ruleset.elements) if (elements.size > 0) witnesses.set(set, sp.key);
      expected.add(ruleset);
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

  /**
   * Scripts the kernel refuses unless someone added a rule: the next EXTRA_RULE_PROBES chains of
   * `expected` (in name order, in turns), each at its rule count.
   */
  extraRuleProbes({ family, ruleCounts }: ExpectedObjects): string[] {
    const names = [...ruleCounts.keys()].sort();
    const last = this.#lastProbed.get(family);
    // After the last chain probed; from the first again past the end (findIndex: -1).
    const start =
      last === undefined
        ? 0
        : Math.max(
            names.findIndex((name) => name > last),
            0,
          );
    const probed = [...names.slice(start), ...names.slice(0, start)].slice(0, EXTRA_RULE_PROBES);
    if (probed.length > 0) this.#lastProbed.set(family, probed[probed.length - 1]!);
    return probed.map((chain) => extraRuleScript(family, chain, ruleCounts.get(chain)!));
  }
}
