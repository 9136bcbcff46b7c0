// The desired ruleset: what kproxy wants in each family's table, as plain data. The full script
// and the incremental diff are both computed from it, so they cannot disagree.
import { compareText } from '../../../contract/base/compare-text.ts';
import type { ChainSpec, ElementSpec, NftFamily, SetSpec } from './transaction.ts';

export interface FamilyRuleset {
  readonly family: NftFamily;
  /** Sets and maps by name, in name order. */
  readonly sets: ReadonlyMap<string, SetSpec>;
  /** Chains by name, in name order. */
  readonly chains: ReadonlyMap<string, ChainSpec>;
  /** Elements by set name, then by key; both in sorted order. */
  readonly elements: ReadonlyMap<string, ReadonlyMap<string, ElementSpec>>;
  /**
   * Read back from the kernel (see adopt.ts): chain rules and elements unknown (`elements` is
   * empty), set definitions unchecked.
   */
  readonly adopted?: boolean;
}

/** The rules of a chain read back from the kernel: never equal to any desired chain's rules. */
export const UNKNOWN_RULES: readonly string[] = Object.freeze(['# rules read back from the kernel']);

/**
 * A set the live dataplane puts one nonce in at every full sync; listing it is cheap at any size.
 * Filled outside any plan, so a diff after adoption leaves it alone (diff.ts).
 */
export const CANARY_SET = 'canary';

/** One entry per family that has state; a family without state has no table. */
export interface DesiredRuleset {
  readonly ip?: FamilyRuleset;
  readonly ip6?: FamilyRuleset;
}

export const FAMILIES: readonly NftFamily[] = ['ip', 'ip6'];

/** Collects one family's objects; adding the same object twice must be identical (else a bug). */
export class RulesetBuilder {
  readonly family: NftFamily;
  readonly #sets = new Map<string, SetSpec>();
  readonly #chains = new Map<string, ChainSpec>();
  readonly #elements = new Map<string, Map<string, ElementSpec>>();
  /** What earlier drain() calls handed out (elements: only those of the remembered sets). */
  readonly #drained = {
    sets: new Map<string, SetSpec>(),
    chains: new Map<string, ChainSpec>(),
    elements: new Map<string, Map<string, ElementSpec>>(),
  };
  #pendingElements = 0;
  /** build() hands its maps out: the builder is done then. */
  #built = false;

  /** Open builders accept elements of sets they did not declare (a service port's fragment). */
  readonly #open: boolean;

  constructor(family: NftFamily, options: { readonly open?: boolean } = {}) {
    this.family = family;
    this.#open = options.open ?? false;
  }

  /** Elements added since the builder was made or last drained. */
  get pendingElements(): number {
    return this.#pendingElements;
  }

  addSet(set: SetSpec): void {
    this.#notBuilt();
    if (!addOnce(this.#sets, this.#drained.sets, set.name, set, 'set')) return;
    if (!this.#elements.has(set.name)) this.#elements.set(set.name, new Map());
  }

  addChain(chain: ChainSpec): void {
    this.#notBuilt();
    addOnce(this.#chains, this.#drained.chains, chain.name, chain, 'chain');
  }

  hasElement(set: string, key: string): boolean {
    return this.#elementsOf(set).has(key) || (this.#drained.elements.get(set)?.has(key) ?? false);
  }

  addElement(set: string, element: ElementSpec): void {
    this.#notBuilt();
    const earlier = this.#drained.elements.get(set) ?? NONE;
    if (addOnce(this.#elementsOf(set), earlier, element.key, element, `element of ${set}`, sameElement))
      this.#pendingElements++;
  }

  /** The ruleset, in name and key order; the builder's last use (it hands out its own maps). */
  build(): FamilyRuleset {
    this.#notBuilt();
    this.#built = true;
    return {
      family: this.family,
      sets: inKeyOrder(this.#sets),
      chains: inKeyOrder(this.#chains),
      elements: new Map(
        [...inKeyOrder(this.#elements)].map(([name, elements]) => [name, inKeyOrder(elements)]),
      ),
    };
  }

  /**
   * What was added since the last drain (sets and elements of declared sets only where there are
   * new ones), then forgets it, except the elements of `remembered` sets: those that later
   * additions look up (hasElement) or may add again. A ruleset built and written in pieces, with
   * memory bounded by a piece.
   */
  drain(remembered: ReadonlySet<string>): FamilyRuleset {
    this.#notBuilt();
    // Sets and chains in name order, as build() gives them; elements in the order they came: a
    // piece is written, never shown, and sorting ~100k elements per piece cost ~0.5 s of a cold
    // start at 30k services.
    const piece: FamilyRuleset = {
      family: this.family,
      sets: new Map(inKeyOrder(this.#sets)),
      chains: new Map(inKeyOrder(this.#chains)),
      elements: new Map([...this.#elements].filter(([, elements]) => elements.size > 0)),
    };
    for (const [name, set] of this.#sets) this.#drained.sets.set(name, set);
    for (const [name, chain] of this.#chains) this.#drained.chains.set(name, chain);
    for (const [name, elements] of this.#elements) {
      if (!remembered.has(name)) continue;
      const earlier = this.#drained.elements.get(name) ?? new Map<string, ElementSpec>();
      for (const [key, element] of elements) earlier.set(key, element);
      this.#drained.elements.set(name, earlier);
    }
    this.#sets.clear();
    this.#chains.clear();
    this.#elements.clear();
    this.#pendingElements = 0;
    return piece;
  }

  #notBuilt(): void {
    if (this.#built) throw new Error('ruleset builder used after build()');
  }

  #elementsOf(set: string): Map<string, ElementSpec> {
    let elements = this.#elements.get(set);
    if (!elements && (this.#open || this.#drained.sets.has(set))) {
      elements = new Map();
      this.#elements.set(set, elements);
    }
    if (!elements) throw new Error(`element for undeclared set ${set}`);
    return elements;
  }
}

const NONE: ReadonlyMap<string, ElementSpec> = new Map();

/**
 * Adds `value` unless already there (in `map` or in `drained`); whether it was new. Shared chains
 * and elements come again from every service port that uses them (hundreds of thousands of times
 * at scale), so the check that they are the same is cheap.
 */
function addOnce<T>(
  map: Map<string, T>,
  drained: ReadonlyMap<string, T>,
  name: string,
  value: T,
  what: string,
  same: (kept: T, added: T) => boolean = sameJson,
): boolean {
  const existing = map.get(name) ?? drained.get(name);
  if (existing !== undefined && !same(existing, value)) {
    throw new Error(`${what} ${name} defined twice, differently`);
  }
  if (existing !== undefined) return false;
  map.set(name, value);
  return true;
}

/** Two elements alike in key, value and comment (what JSON.stringify would compare, without it). */
export function sameElement(kept: ElementSpec, added: ElementSpec): boolean {
  return kept.key === added.key && kept.value === added.value && kept.comment === added.comment;
}

/** The JSON of each kept set or chain, made once. */
const fingerprints = new WeakMap<object, string>();

function sameJson<T>(kept: T, added: T): boolean {
  if (kept === added) return true;
  let json = typeof kept === 'object' && kept !== null ? fingerprints.get(kept) : undefined;
  if (json === undefined) {
    json = JSON.stringify(kept);
    if (typeof kept === 'object' && kept !== null) fingerprints.set(kept, json);
  }
  return json === JSON.stringify(added);
}

/**
 * `map` itself when its keys are in order, else a sorted copy. Many maps come in order (the IPVS
 * ClientIP maps, ~30k elements each at 3,000 services × 10: affinity.ts adds them so): one pass
 * checks, instead of a sort and a copy.
 */
function inKeyOrder<T>(map: Map<string, T>): Map<string, T> {
  let previous: string | undefined;
  for (const key of map.keys()) {
    if (previous !== undefined && compareText(previous, key) > 0)
      return new Map([...map].sort(([a], [b]) => compareText(a, b)));
    previous = key;
  }
  return map;
}
