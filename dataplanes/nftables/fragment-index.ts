// The fast path of an incremental sync at scale: instead of rebuilding and diffing the whole
// desired ruleset (hundreds of milliseconds at 30k services), only the fragments of the changed
// service ports are rebuilt.
//
// A fragment is what one service port contributes on its own: its elements, its affinity
// chains and sets, the count chains it uses, its hairpin elements. Objects several ports share
// (a count chain, a hairpin element) are reference counted. The full ruleset gives an address
// claimed by two service ports to the first one; fragments cannot express that, so an index
// refuses to exist when ports collide, and a plan that would create a collision is refused: the
// caller then uses the full diff, which is always right.
import type { NodeSettings, ProxyState, ServicePort } from '../../src/model/proxy-state.ts';
import { familySyntax } from './family-syntax.ts';
import { type FamilyRuleset, RulesetBuilder } from './ruleset.ts';
import { addServicePort } from './service-port.ts';
import type { ChainSpec, ElementSpec, NftFamily, SetSpec } from './transaction.ts';

type Part =
  | { readonly kind: 'element'; readonly set: string; readonly element: ElementSpec }
  | { readonly kind: 'chain'; readonly chain: ChainSpec }
  | { readonly kind: 'set'; readonly set: SetSpec }
  // Not written to the kernel: who owns an address (see CLAIMS).
  | { readonly kind: 'claim'; readonly owner: string };

/** Sets whose keys a service port claims: a key in either set of a group belongs to one port. */
const CLAIMS: Readonly<Record<string, string>> = {
  'service-ips': 'vip',
  'no-endpoint-services': 'vip',
  'service-nodeports': 'nodeport',
  'no-endpoint-nodeports': 'nodeport',
  'firewall-ips': 'firewall',
};

function fragment(family: NftFamily, node: NodeSettings, sp: ServicePort): Map<string, Part> {
  const builder = new RulesetBuilder(family, { open: true });
  addServicePort(builder, familySyntax(family === 'ip' ? 'IPv4' : 'IPv6'), node, sp);
  const built = builder.build();
  const parts = new Map<string, Part>();
  for (const set of built.sets.values()) parts.set(`s\0${set.name}`, { kind: 'set', set });
  for (const chain of built.chains.values()) parts.set(`c\0${chain.name}`, { kind: 'chain', chain });
  for (const [set, elements] of built.elements) {
    for (const element of elements.values()) {
      parts.set(`e\0${set}\0${element.key}`, { kind: 'element', set, element });
      const claim = CLAIMS[set];
      if (claim) parts.set(`k\0${claim}\0${element.key}`, { kind: 'claim', owner: sp.key });
    }
  }
  return parts;
}

/** Before/after of the touched objects only, ready for diffFamily; commit() once applied. */
export interface FragmentPlan {
  readonly before: FamilyRuleset;
  readonly after: FamilyRuleset;
  commit(): void;
}

function partial(family: NftFamily, parts: readonly Part[], setNames: ReadonlySet<string>): FamilyRuleset {
  const sets = new Map<string, SetSpec>();
  const chains = new Map<string, ChainSpec>();
  const elements = new Map<string, Map<string, ElementSpec>>([...setNames].map((name) => [name, new Map()]));
  for (const part of parts) {
    if (part.kind === 'set') sets.set(part.set.name, part.set);
    else if (part.kind === 'chain') chains.set(part.chain.name, part.chain);
    else if (part.kind === 'element') elements.get(part.set)!.set(part.element.key, part.element);
  }
  return { family, sets, chains, elements };
}

// Stored form of a part. Elements, nearly all of the index, keep only value and comment (the id
// already holds set and key); the rare other parts are JSON.
const ABSENT = '\u0002';
const SEPARATOR = '\u0001';

function encode(part: Part): string {
  if (part.kind !== 'element') return `J${JSON.stringify(part)}`;
  const { value, comment } = part.element;
  return `E${value ?? ABSENT}${SEPARATOR}${comment ?? ABSENT}`;
}

function decode(id: string, stored: string): Part {
  if (stored.startsWith('J')) return JSON.parse(stored.slice(1)) as Part;
  const [, set, key] = id.split('\0') as [string, string, string];
  const [value, comment] = stored.slice(1).split(SEPARATOR) as [string, string];
  const element: ElementSpec = {
    key,
    ...(value !== ABSENT && { value }),
    ...(comment !== ABSENT && { comment }),
  };
  return { kind: 'element', set, element };
}

/** An object's part as stored, and how many fragments contribute it (0: absent). */
interface Entry {
  readonly json: string | undefined;
  readonly count: number;
}

export class FragmentIndex {
  readonly family: NftFamily;
  readonly node: NodeSettings;
  /**
   * Object id -> its part, encoded. Strings, not objects: at 30k services x 10 endpoints the index
   * takes about half the memory, and comparing parts is comparing strings.
   */
  readonly #objects = new Map<string, string>();
  /** Reference counts above 1 (shared objects: count chains, hairpin elements). */
  readonly #shared = new Map<string, number>();

  private constructor(family: NftFamily, node: NodeSettings) {
    this.family = family;
    this.node = node;
  }

  /** The index of a whole state; undefined when two service ports claim the same object. */
  static build(family: NftFamily, state: ProxyState): FragmentIndex | undefined {
    const index = new FragmentIndex(family, state.node);
    const plan = index.plan([], [...state.servicePorts.values()]);
    if (!plan) return undefined;
    plan.commit();
    return index;
  }

  /**
   * What replacing the fragments of `removed` ports by those of `added` ports changes; undefined
   * when it would make two ports claim one object differently.
   */
  plan(removed: readonly ServicePort[], added: readonly ServicePort[]): FragmentPlan | undefined {
    const touched = new Map<string, Entry>();
    const stored = (id: string): Entry => {
      const json = this.#objects.get(id);
      return { json, count: json === undefined ? 0 : (this.#shared.get(id) ?? 1) };
    };
    const current = (id: string) => touched.get(id) ?? stored(id);
    for (const sp of removed) {
      for (const id of fragment(this.family, this.node, sp).keys()) {
        const now = current(id);
        if (now.count === 0) throw new Error(`fragment index lost ${id.replaceAll('\0', ' ')} of ${sp.key}`);
        touched.set(id, { json: now.json, count: now.count - 1 });
      }
    }
    for (const sp of added) {
      for (const [id, part] of fragment(this.family, this.node, sp)) {
        const json = encode(part);
        const now = current(id);
        // A shared object must be identical for every port; a different one is a claim collision.
        if (now.count > 0 && now.json !== json) return undefined;
        touched.set(id, { json, count: now.count + 1 });
      }
    }
    const before: Part[] = [];
    const after: Part[] = [];
    const setNames = new Set<string>();
    for (const [id, next] of touched) {
      const prev = stored(id);
      if (prev.count > 0) before.push(decode(id, prev.json!));
      if (next.count > 0) after.push(decode(id, next.json!));
      const part = decode(id, (next.json ?? prev.json)!);
      if (part.kind === 'element') setNames.add(part.set);
    }
    return {
      before: partial(this.family, before, setNames),
      after: partial(this.family, after, setNames),
      commit: () => {
        for (const [id, next] of touched) {
          if (next.count > 0) this.#objects.set(id, next.json!);
          else this.#objects.delete(id);
          if (next.count > 1) this.#shared.set(id, next.count);
          else this.#shared.delete(id);
        }
      },
    };
  }
}
