// The incremental sync: the smallest transaction that takes a kernel holding `prev` to `next`.
// Order matters inside the transaction: new sets and chains first (elements and rules refer to
// them), then rewritten chains, then element deletes before adds (a changed value is a delete
// plus an add), and last the chains and sets nothing refers to any more.
import { runAll, type Steps } from '../../../contract/base/work-slices.ts';
import { defineFamily } from './full-transaction.ts';
import { CANARY_SET, type DesiredRuleset, FAMILIES, type FamilyRuleset, sameElement } from './ruleset.ts';
import { type ChainSpec, type ElementSpec, NftTransaction, type SetSpec, TABLE } from './transaction.ts';

function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function sameChainHeader(a: ChainSpec, b: ChainSpec): boolean {
  return a.comment === b.comment && sameJSON(a.base, b.base);
}

function filledByPackets(set: SetSpec): boolean {
  return set.flags?.includes('dynamic') === true || set.timeoutSeconds !== undefined;
}

/** Adds to `tx` what takes `prev` to `next` (whole tables, or just the touched objects of both). */
export function diffFamily(tx: NftTransaction, prev: FamilyRuleset, next: FamilyRuleset): void {
  runAll(diffFamilySteps(tx, prev, next));
}

/** Elements compared per step: a whole ruleset's diff (after adoption) is done in slices. */
const ELEMENTS_PER_STEP = 1000;

function* diffFamilySteps(tx: NftTransaction, prev: FamilyRuleset, next: FamilyRuleset): Steps<void> {
  const family = next.family;
  let compared = 0;
  for (const [name, set] of next.sets) {
    const old = prev.sets.get(name);
    if (old === undefined) tx.addSet(family, set);
    // Names of sets that can change (affinity) carry their definition, so this is a bug.
    else if (!prev.adopted && !sameJSON(old, set)) throw new Error(`nft set ${name} changed its definition`);
  }
  const rewritten: ChainSpec[] = [];
  for (const [name, chain] of next.chains) {
    const old = prev.chains.get(name);
    if (old === undefined) {
      tx.addChain(family, chain);
      rewritten.push(chain);
    } else if (!prev.adopted && !sameChainHeader(old, chain)) {
      throw new Error(`nft chain ${name} changed its hook or comment`);
    } else if (!sameJSON(old.rules, chain.rules)) {
      tx.flushChain(family, name);
      rewritten.push(chain);
    }
  }
  for (const chain of rewritten) {
    for (const rule of chain.rules) tx.addRule(family, chain.name, rule);
  }
  const adds: [string, ElementSpec[]][] = [];
  for (const [set, nextElements] of next.elements) {
    // Adopted: the elements in the kernel are unknown; replace them, but for the sets the packet
    // path fills (dynamic, or with a timeout: affinity, whatever their names) and the canary
    // (the plan sets it: planner.ts).
    const spec = next.sets.get(set);
    if (prev.adopted && spec) {
      if (!filledByPackets(spec) && set !== CANARY_SET) {
        tx.flushSet(family, spec.kind, set);
        adds.push([set, [...nextElements.values()]]);
      }
      continue;
    }
    const prevElements = prev.elements.get(set) ?? new Map<string, ElementSpec>();
    const removed: ElementSpec[] = [];
    const added: ElementSpec[] = [];
    for (const [key, element] of prevElements) {
      const now = nextElements.get(key);
      if (now === undefined || !sameElement(now, element)) removed.push(element);
      if (++compared % ELEMENTS_PER_STEP === 0) yield;
    }
    for (const [key, element] of nextElements) {
      const before = prevElements.get(key);
      if (before === undefined || !sameElement(before, element)) added.push(element);
      if (++compared % ELEMENTS_PER_STEP === 0) yield;
    }
    tx.deleteElements(family, set, removed);
    adds.push([set, added]);
  }
  for (const [set, added] of adds) tx.addElements(family, set, added);
  const gone = [...prev.chains.keys()].filter((name) => !next.chains.has(name));
  // Flush first: a removed chain may jump to another removed chain.
  for (const name of gone) tx.flushChain(family, name);
  for (const name of gone) tx.deleteChain(family, name);
  for (const [name, set] of prev.sets) if (!next.sets.has(name)) tx.deleteSet(family, set.kind, name);
}

export function diffRulesets(prev: DesiredRuleset, next: DesiredRuleset, table = TABLE): NftTransaction {
  return runAll(diffRulesetsSteps(prev, next, table));
}

/** diffRulesets in steps (work-slices.ts): the live dataplane runs them in slices. */
export function* diffRulesetsSteps(
  prev: DesiredRuleset,
  next: DesiredRuleset,
  table = TABLE,
): Steps<NftTransaction> {
  const tx = new NftTransaction(table);
  for (const family of FAMILIES) {
    const before = prev[family];
    const after = next[family];
    if (before && after) yield* diffFamilySteps(tx, before, after);
    else if (before) tx.deleteTable(family);
    else if (after) defineFamily(tx, after);
  }
  return tx;
}
