// The desired ruleset: what kproxy wants in each family's table, as plain data. The full script
// and the incremental diff are both computed from it, so they cannot disagree.
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

  /** Open builders accept elements of sets they did not declare (a service port's fragment). */
  readonly #open: boolean;

  constructor(family: NftFamily, options: { readonly open?: boolean } = {}) {
    this.family = family;
    this.#open = options.open ?? false;
  }

  addSet(set: SetSpec): void {
    addOnce(this.#sets, set.name, set, 'set');
    if (!this.#elements.has(set.name)) this.#elements.set(set.name, new Map());
  }

  addChain(chain: ChainSpec): void {
    addOnce(this.#chains, chain.name, chain, 'chain');
  }

  hasElement(set: string, key: string): boolean {
    return this.#elementsOf(set).has(key);
  }

  addElement(set: string, element: ElementSpec): void {
    addOnce(this.#elementsOf(set), element.key, element, `element of ${set}`);
  }

  build(): FamilyRuleset {
    return {
      family: this.family,
      sets: sorted(this.#sets),
      chains: sorted(this.#chains),
      elements: new Map([...sorted(this.#elements)].map(([name, elements]) => [name, sorted(elements)])),
    };
  }

  #elementsOf(set: string): Map<string, ElementSpec> {
    let elements = this.#elements.get(set);
    if (!elements && this.#open) {
      elements = new Map();
      this.#elements.set(set, elements);
    }
    if (!elements) throw new Error(`element for undeclared set ${set}`);
    return elements;
  }
}

function addOnce<T>(map: Map<string, T>, name: string, value: T, what: string): void {
  const existing = map.get(name);
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(value)) {
    throw new Error(`${what} ${name} defined twice, differently`);
  }
  map.set(name, value);
}

function sorted<T>(map: ReadonlyMap<string, T>): Map<string, T> {
  return new Map([...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
