// Finding the element of a set a packet's values match, as a scan in order would (the first that
// matches), without comparing every element: a trace looks values up in maps of up to hundreds of
// thousands of elements (30,000 Services), and `kproxy diff` traces every Service port through
// them, which scanning made hours long. Elements are found by their keys (exactKeys: a part
// matches when the two share a key, so an element is filed under every combination of its parts'
// keys and a packet looked up under each of its own); those with a prefix or range part are still
// compared one by one, only those before the one found.
import { runAll, type Steps } from '../../../contract/base/work-slices.ts';
import { exactKeys, valueMatches } from './match-value.ts';
import type { NftElement, NftRuleset } from './nft-ruleset.ts';

interface ElementIndex {
  /** What the elements were when indexed: the fake kernel's sets change in place (nft-ruleset.ts). */
  readonly length: number;
  readonly first: NftElement | undefined;
  readonly last: NftElement | undefined;
  /** Each key combination's first element, by position. */
  readonly exact: Map<string, number>;
  /** The positions of the elements no key finds, in order. */
  readonly scanned: number[];
}

const indexes = new WeakMap<readonly NftElement[], ElementIndex>();
/** Below this many elements a scan is as fast as building the index. */
const INDEXED_FROM = 64;

/** The first of `elements` whose key matches `values` part by part (valueMatches). */
export function findElement(
  elements: readonly NftElement[],
  values: readonly string[],
): NftElement | undefined {
  const combinations = elements.length < INDEXED_FROM ? undefined : keyCombinations(values);
  if (combinations === undefined) return scan(elements, values);
  const index = indexOf(elements);
  let found = elements.length;
  for (const key of combinations) found = Math.min(found, index.exact.get(key) ?? found);
  for (const at of index.scanned) {
    if (at > found) break;
    if (matches(elements[at]!, values)) return elements[at];
  }
  return elements[found];
}

function matches(element: NftElement, values: readonly string[]): boolean {
  return (
    element.key.length === values.length &&
    element.key.every((pattern, i) => valueMatches(pattern, values[i]!))
  );
}

function scan(elements: readonly NftElement[], values: readonly string[]): NftElement | undefined {
  return elements.find((element) => matches(element, values));
}

/** Every combination of the parts' keys, joined; undefined when a part has none. */
function keyCombinations(parts: readonly string[]): string[] | undefined {
  let combinations = [''];
  for (const part of parts) {
    const keys = exactKeys(part);
    if (keys === undefined) return undefined;
    combinations = combinations.flatMap((prefix) => keys.map((key) => `${prefix}${key}\0`));
  }
  return combinations;
}

/**
 * The index of `elements`, built again when they changed. Changes come as appended new elements
 * and deletions (nft-ruleset.ts): either changes the length or the last element.
 */
function indexOf(elements: readonly NftElement[]): ElementIndex {
  return keptIndex(elements) ?? runAll(buildIndexSteps(elements));
}

function keptIndex(elements: readonly NftElement[]): ElementIndex | undefined {
  const kept = indexes.get(elements);
  return kept &&
    kept.length === elements.length &&
    kept.first === elements[0] &&
    kept.last === elements.at(-1)
    ? kept
    : undefined;
}

/** Elements indexed between two steps. */
const ELEMENTS_PER_STEP = 256;

function* buildIndexSteps(elements: readonly NftElement[]): Steps<ElementIndex> {
  const exact = new Map<string, number>();
  const scanned: number[] = [];
  for (const [at, element] of elements.entries()) {
    if ((at + 1) % ELEMENTS_PER_STEP === 0) yield;
    const combinations = keyCombinations(element.key);
    if (combinations === undefined) scanned.push(at);
    else for (const key of combinations) if (!exact.has(key)) exact.set(key, at);
  }
  const index = { length: elements.length, first: elements[0], last: elements.at(-1), exact, scanned };
  indexes.set(elements, index);
  return index;
}

/**
 * Indexes every set of `ruleset` large enough to be, in steps: at 30,000 Services that is ~450,000
 * elements (seconds), which the daemon's drift check builds before its traces, in slices, rather
 * than in the first trace's one turn (a set changed after it is indexed again at its next lookup).
 */
export function* indexRulesetSteps(ruleset: NftRuleset): Steps<void> {
  for (const table of ruleset.tables.values())
    for (const set of table.sets.values())
      if (set.elements.length >= INDEXED_FROM && keptIndex(set.elements) === undefined)
        yield* buildIndexSteps(set.elements);
}
