// The fast path of an incremental sync at scale: instead of rebuilding and diffing the whole
// desired ruleset (hundreds of milliseconds at 30k services), only the fragments of the changed
// service ports are rebuilt.
//
// A fragment is what one service port contributes on its own: its elements (affinity ones too),
// the count chains it uses, its hairpin elements and its cluster IP. No two service ports of a
// state claim one address:port/protocol or node port/protocol (the model gives each to one,
// src/model/address-claims.ts), so each claimed key has one owner; a plan that would give it a
// second one is a bug and throws. A shared object that two ports would spell differently makes the
// index step aside (the caller then uses the full diff, which is always right).
//
// The index stores little (memory at 30k services x 10 endpoints: ~80 MiB when it kept every
// part, a few MiB now): who claims each address, and the few objects several ports may share (a
// count chain, a hairpin element, a cluster IP, with a reference count). Every other element is keyed by an
// address its port claims, so it belongs to that port alone, and the elements a port had are
// recomputed from the port as it was (the caller's previous state) instead of being stored.

import { flatText } from '../../contract/base/flat-text.ts';
import { runInSlices, type Steps } from '../../contract/base/work-slices.ts';
import type {
  Endpoint,
  NodeSettings,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../contract/proxy-state.ts';
import { familySyntax } from '../shared/nft/family-syntax.ts';
import { type FamilyRuleset, RulesetBuilder, sameElement } from '../shared/nft/ruleset.ts';
import type { ChainSpec, ElementSpec, NftFamily, SetSpec } from '../shared/nft/transaction.ts';
import type { EndpointChanges, SlotTable } from './endpoint-slots.ts';
import { addServicePort, hairpinPair } from './service-port.ts';
import { CLAIM_GROUPS, SETS, SHARED_SETS } from './sets.ts';

type Part =
  | { readonly kind: 'element'; readonly set: string; readonly element: ElementSpec }
  | { readonly kind: 'chain'; readonly chain: ChainSpec }
  | { readonly kind: 'set'; readonly set: SetSpec }
  // Not written to the kernel: who owns an address (the claimed sets, sets.ts).
  | { readonly kind: 'claim'; readonly owner: string };

const CLUSTER_IPS = SETS.clusterIps.name;

/**
 * A shared element's id. A cluster IP (one per Service, 30k at 30k services) is its own id: the
 * port's address string, which the state holds anyway, instead of a new flat string each (~1.4
 * MiB kept at 30k services); no other id is free of '\0'.
 */
function sharedElementId(set: string, key: string): string {
  return set === CLUSTER_IPS ? key : flatText('e\0', set, '\0', key);
}

/** Elements by set, then by key. */
type ElementsBySet = ReadonlyMap<string, ReadonlyMap<string, ElementSpec>>;

/**
 * What one service port contributes: by id, the parts the index keeps track of (claims and
 * shareable parts); apart, by set in build order, the elements only this port can have (keyed by
 * an address it claims), which need no id: they are most of a state's elements, and an id each was
 * garbage made for nothing while an index is built (a full sync's cold start).
 */
interface Fragment {
  readonly tracked: ReadonlyMap<string, Part>;
  readonly own: ElementsBySet;
  /**
   * Hairpin pair id -> how many of the port's endpoints hold it (a local endpoint in both its
   * cluster and local sets twice): counted per endpoint, the pairs of an endpoint change are
   * those of the endpoints that changed, whatever the others hold.
   */
  readonly hairpin: ReadonlyMap<string, number>;
}

const NOTHING_REMEMBERED: ReadonlySet<string> = new Set();

/**
 * What `sp` contributes; of a port whose endpoints alone changed (`changes`), its `side` of the
 * change only: the endpoint elements at the changed indexes and the hairpin pairs of the endpoints
 * that came, went or changed. What both sides would hold alike is left out: an endpoint change
 * of a port with 100,000 endpoints builds a few elements, not 200,000 (~0.5 s).
 */
function fragment(
  family: NftFamily,
  node: NodeSettings,
  sp: ServicePort,
  slots?: SlotTable,
  changes?: EndpointChanges,
  side: 'before' | 'after' = 'after',
): Fragment {
  const builder = new RulesetBuilder(family, { open: true });
  const syntax = familySyntax(family === 'ip' ? 'IPv4' : 'IPv6');
  addServicePort(builder, syntax, node, sp, slots?.get(sp.key), changes?.indexes, false);
  // drain(), not build(): the port's elements in the order it added them. build() sorts them, ~0.3 s
  // for a Service of 100,000 endpoints at each change, for nothing: that order is deterministic too.
  const built = builder.drain(NOTHING_REMEMBERED);
  const tracked = new Map<string, Part>();
  const own = new Map<string, ReadonlyMap<string, ElementSpec>>();
  // Ids are flat strings: the index keeps one per claim and per shared element (see flat-text.ts).
  // The hairpin set is shared, but this port's pairs are not in `built` (addServicePort was told
  // to leave them out): they are counted per endpoint below.
  for (const set of built.sets.values()) tracked.set(flatText('s\0', set.name), { kind: 'set', set });
  for (const chain of built.chains.values())
    tracked.set(flatText('c\0', chain.name), { kind: 'chain', chain });
  for (const [set, elements] of built.elements) {
    const shared = SHARED_SETS.has(set);
    const claim = CLAIM_GROUPS.get(set);
    if (!shared) own.set(set, elements);
    // Endpoint maps, most of the elements, are neither shared nor claimed: not walked here.
    if (!shared && !claim) continue;
    for (const element of elements.values()) {
      if (shared) tracked.set(sharedElementId(set, element.key), { kind: 'element', set, element });
      if (claim) tracked.set(flatText('k\0', claim, '\0', element.key), { kind: 'claim', owner: sp.key });
    }
  }
  const hairpin = new Map<string, number>();
  const count = (ep: Endpoint) => {
    if (!ep.isLocal) return;
    const id = sharedElementId(SETS.hairpin.name, hairpinPair(ep).key);
    hairpin.set(id, (hairpin.get(id) ?? 0) + 1);
  };
  if (changes) changes[side].forEach(count);
  else for (const eps of [sp.clusterEndpoints, sp.localEndpoints]) eps.forEach(count);
  return { tracked, own, hairpin };
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

/**
 * A shareable part, and how many fragments contribute it (0: absent). The JSON is left out for a
 * plain set element (a hairpin pair, one per pod IP at scale): its id says it all.
 */
interface Shared {
  readonly json: string | undefined;
  readonly count: number;
}

function stored(part: Part): string | undefined {
  const plain =
    part.kind === 'element' && part.element.value === undefined && part.element.comment === undefined;
  return plain ? undefined : JSON.stringify(part);
}

function restored(id: string, json: string | undefined): Part {
  if (json !== undefined) return JSON.parse(json) as Part;
  if (!id.includes('\0')) return { kind: 'element', set: CLUSTER_IPS, element: { key: id } };
  const [, set, key] = id.split('\0') as [string, string, string];
  return { kind: 'element', set, element: { key } };
}

/**
 * Endpoints (about the elements) per plan while an index is built: ~10 ms of work, whether the
 * ports have ten endpoints each or one Service has thousands of ports with a hundred each.
 */
const BUILD_BATCH_ENDPOINTS = 5000;

const ABSENT: Shared = { json: undefined, count: 0 };

type OwnMaps = readonly [string, ReadonlyMap<string, ElementSpec>][];

/** The own element maps by set (a plan of several ports has several per set). */
function bySet(own: OwnMaps): Map<string, ReadonlyMap<string, ElementSpec>[]> {
  const sets = new Map<string, ReadonlyMap<string, ElementSpec>[]>();
  for (const [set, elements] of own) {
    const maps = sets.get(set);
    if (maps) maps.push(elements);
    else sets.set(set, [elements]);
  }
  return sets;
}

function findElement(maps: readonly ReadonlyMap<string, ElementSpec>[] | undefined, key: string) {
  for (const map of maps ?? []) {
    const element = map.get(key);
    if (element) return element;
  }
  return undefined;
}

/** Pushes to `out` the elements of `sets` that `others` lacks or holds otherwise. */
function pushChanged(
  sets: ReadonlyMap<string, readonly ReadonlyMap<string, ElementSpec>[]>,
  others: ReadonlyMap<string, readonly ReadonlyMap<string, ElementSpec>[]>,
  out: Part[],
): void {
  for (const [set, maps] of sets) {
    const other = others.get(set);
    for (const map of maps) {
      for (const element of map.values()) {
        const kept = findElement(other, element.key);
        if (kept === undefined || !sameElement(kept, element)) out.push({ kind: 'element', set, element });
      }
    }
  }
}

/**
 * The own elements that differ between `ownBefore` and `ownAfter`, as parts pushed to `before` and
 * `after`: an element the same on both sides writes nothing, and leaving it out keeps the diff of
 * a changed port with 100,000 endpoints (one of them changed) to a few elements.
 */
function ownChanges(ownBefore: OwnMaps, ownAfter: OwnMaps, before: Part[], after: Part[]): void {
  const beforeSets = bySet(ownBefore);
  const afterSets = bySet(ownAfter);
  pushChanged(beforeSets, afterSets, before);
  pushChanged(afterSets, beforeSets, after);
}

/** A shared part a plan touches: as the index holds it, and as the plan leaves it. */
interface SharedChange {
  readonly prev: Shared;
  readonly next: Shared;
}

/** The own elements of a plan's removed ports (before) and added ports (after), by set. */
interface OwnElements {
  readonly before: [string, ReadonlyMap<string, ElementSpec>][];
  readonly after: [string, ReadonlyMap<string, ElementSpec>][];
}

/**
 * A plan of the index, its rulesets made when first read: building a whole index commits plans
 * without reading them. A class rather than an object literal of getters and closures: each plan's
 * new closures ran the optimized code the index build had left, whose paths (no deletes, nothing
 * read) an endpoint change does not take, so every change deoptimized there (--trace-deopt).
 */
class IndexPlan implements FragmentPlan {
  readonly #family: NftFamily;
  /** Absent for a plan that is never read (a build's). */
  readonly #own: OwnElements | undefined;
  readonly #shared: ReadonlyMap<string, SharedChange>;
  readonly #commit: () => void;
  #rulesets: { readonly before: FamilyRuleset; readonly after: FamilyRuleset } | undefined;

  constructor(
    family: NftFamily,
    own: OwnElements | undefined,
    shared: ReadonlyMap<string, SharedChange>,
    commit: () => void,
  ) {
    this.#family = family;
    this.#own = own;
    this.#shared = shared;
    this.#commit = commit;
  }

  get before(): FamilyRuleset {
    return this.#made().before;
  }

  get after(): FamilyRuleset {
    return this.#made().after;
  }

  commit(): void {
    this.#commit();
  }

  #made(): { readonly before: FamilyRuleset; readonly after: FamilyRuleset } {
    if (this.#rulesets) return this.#rulesets;
    if (!this.#own) throw new Error('a fragment plan made unread was read');
    const before: Part[] = [];
    const after: Part[] = [];
    ownChanges(this.#own.before, this.#own.after, before, after);
    // A shared part present before and after, the same, writes nothing (a changed port's hairpin
    // pairs: a third of 100,000 at a wide Service): only the others reach the diff.
    for (const [id, { prev, next }] of this.#shared) {
      if (prev.count > 0 === next.count > 0 && prev.json === next.json) continue;
      if (prev.count > 0) before.push(restored(id, prev.json));
      if (next.count > 0) after.push(restored(id, next.json));
    }
    const setNames = new Set<string>();
    for (const parts of [before, after])
      for (const part of parts) if (part.kind === 'element') setNames.add(part.set);
    this.#rulesets = {
      before: partial(this.#family, before, setNames),
      after: partial(this.#family, after, setNames),
    };
    return this.#rulesets;
  }
}

export class FragmentIndex {
  readonly family: NftFamily;
  readonly node: NodeSettings;
  /** Claim id -> the key of the service port that holds the address. */
  readonly #claims = new Map<string, string>();
  /** Shared part id -> how many fragments contribute it; apart from the JSON, which most lack. */
  readonly #sharedCounts = new Map<string, number>();
  readonly #sharedJson = new Map<string, string>();

  private constructor(family: NftFamily, node: NodeSettings) {
    this.family = family;
    this.node = node;
  }

  /**
   * The index of a whole state; undefined when two ports spell a shared object differently. Batch by
   * batch, giving way to the event loop in between (work-slices.ts): about a second at 30k
   * services, during which health probes and metrics scrapes are still answered.
   */
  static build(family: NftFamily, state: ProxyState): Promise<FragmentIndex | undefined> {
    return runInSlices(FragmentIndex.buildSteps(family, state));
  }

  /** build() in steps, one per batch: the dry-run runs them straight through. */
  static *buildSteps(family: NftFamily, state: ProxyState): Steps<FragmentIndex | undefined> {
    const index = new FragmentIndex(family, state.node);
    // In batches: a plan holds every element of its ports, and the whole state's would be as big
    // as the whole ruleset (a memory peak the daemon keeps as RSS).
    let batch: ServicePort[] = [];
    let endpoints = 0;
    const commitBatch = (): boolean => {
      const plan = index.#plan([], batch, false);
      batch = [];
      endpoints = 0;
      plan?.commit();
      return plan !== undefined;
    };
    for (const sp of state.servicePorts.values()) {
      batch.push(sp);
      endpoints += sp.clusterEndpoints.length + sp.localEndpoints.length + 1;
      if (endpoints < BUILD_BATCH_ENDPOINTS) continue;
      if (!commitBatch()) return undefined;
      yield;
    }
    return batch.length === 0 || commitBatch() ? index : undefined;
  }

  /**
   * What replacing the fragments of `removed` ports (as they were when indexed, endpoints at their
   * `slotsBefore`) by those of `added` ports (at `slotsAfter`) changes; undefined when two ports
   * would spell a shared object differently. The slots (endpoint-slots.ts) change only the ports'
   * own elements: what the index tracks does not depend on them. A port in both whose endpoints
   * alone changed (`changes`, by key) is built as that change (fragment()).
   */
  plan(
    removed: readonly ServicePort[],
    added: readonly ServicePort[],
    slotsBefore?: SlotTable,
    slotsAfter?: SlotTable,
    changes?: ReadonlyMap<ServicePortKey, EndpointChanges>,
  ): FragmentPlan | undefined {
    return this.#plan(removed, added, true, slotsBefore, slotsAfter, changes);
  }

  /**
   * plan(), whose before and after hold the ports' own elements only when `readable`: a build
   * commits its plans unread, and a batch's own elements (~5,000), kept until the batch is
   * committed, outlived two scavenges and went to the old generation: ~100 MiB of garbage, the
   * daemon's peak RSS, over a whole index at 30k services x 10 endpoints.
   */
  #plan(
    removed: readonly ServicePort[],
    added: readonly ServicePort[],
    readable: boolean,
    slotsBefore?: SlotTable,
    slotsAfter?: SlotTable,
    changes?: ReadonlyMap<ServicePortKey, EndpointChanges>,
  ): FragmentPlan | undefined {
    const claims = new Map<string, string | undefined>();
    // Each shared part as the index holds it (read once) and as the plan leaves it.
    const shared = new Map<string, SharedChange>();
    const owner = (id: string) => (claims.has(id) ? claims.get(id) : this.#claims.get(id));
    const change = (id: string): SharedChange => {
      const touched = shared.get(id);
      if (touched) return touched;
      const held = this.#stored(id);
      return { prev: held, next: held };
    };
    const own: OwnElements = { before: [], after: [] };
    for (const sp of removed) {
      const fragmentBefore = fragment(
        this.family,
        this.node,
        sp,
        slotsBefore,
        changes?.get(sp.key),
        'before',
      );
      for (const [id, part] of fragmentBefore.tracked) {
        if (part.kind === 'claim') {
          if (owner(id) !== sp.key)
            throw new Error(`fragment index lost ${id.replaceAll('\0', ' ')} of ${sp.key}`);
          claims.set(id, undefined);
        } else {
          const { prev, next } = change(id);
          if (next.count === 0)
            throw new Error(`fragment index lost ${id.replaceAll('\0', ' ')} of ${sp.key}`);
          shared.set(id, { prev, next: { json: next.json, count: next.count - 1 } });
        }
      }
      for (const [id, times] of fragmentBefore.hairpin) {
        const { prev, next } = change(id);
        if (next.count < times)
          throw new Error(`fragment index lost ${id.replaceAll('\0', ' ')} of ${sp.key}`);
        shared.set(id, { prev, next: { json: undefined, count: next.count - times } });
      }
      if (readable) for (const [set, elements] of fragmentBefore.own) own.before.push([set, elements]);
    }
    for (const sp of added) {
      const fragmentAfter = fragment(this.family, this.node, sp, slotsAfter, changes?.get(sp.key), 'after');
      for (const [id, part] of fragmentAfter.tracked) {
        if (part.kind === 'claim') {
          if (owner(id) !== undefined)
            throw new Error(
              `${sp.key} claims ${id.replaceAll('\0', ' ')} of ${owner(id)}: the model gives it to one`,
            );
          claims.set(id, sp.key);
        } else {
          const json = stored(part);
          const { prev, next } = change(id);
          // A shared object must be identical for every port that contributes it.
          if (next.count > 0 && next.json !== json) return undefined;
          shared.set(id, { prev, next: { json, count: next.count + 1 } });
        }
      }
      for (const [id, times] of fragmentAfter.hairpin) {
        const { prev, next } = change(id);
        shared.set(id, { prev, next: { json: undefined, count: next.count + times } });
      }
      if (readable) for (const [set, elements] of fragmentAfter.own) own.after.push([set, elements]);
    }
    return new IndexPlan(this.family, readable ? own : undefined, shared, () => this.#commit(claims, shared));
  }

  /** What a plan changes, into the index, once it is applied. */
  #commit(claims: ReadonlyMap<string, string | undefined>, shared: ReadonlyMap<string, SharedChange>): void {
    for (const [id, key] of claims) {
      if (key === undefined) this.#claims.delete(id);
      else this.#claims.set(id, key);
    }
    for (const [id, { next }] of shared) {
      if (next.count > 0) this.#sharedCounts.set(id, next.count);
      else this.#sharedCounts.delete(id);
      if (next.count > 0 && next.json !== undefined) this.#sharedJson.set(id, next.json);
      else this.#sharedJson.delete(id);
    }
  }

  #stored(id: string): Shared {
    const count = this.#sharedCounts.get(id);
    return count === undefined ? ABSENT : { json: this.#sharedJson.get(id), count };
  }
}
