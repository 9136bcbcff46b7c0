// An in-memory nft for unit tests: applies a transaction's operations all-or-nothing and checks
// what the kernel would refuse (references to missing chains or sets, deleting a chain or set that
// is still referenced, duplicate or missing elements). Its dump compares kernel states.
import type { NftPlan } from '../../../dataplanes/nftables/planner.ts';
import type {
  ChainSpec,
  ElementSpec,
  NftFamily,
  NftOp,
  SetSpec,
} from '../../../dataplanes/shared/nft/transaction.ts';

interface FakeTable {
  sets: Map<string, SetSpec>;
  chains: Map<string, { spec: ChainSpec; rules: string[] }>;
  elements: Map<string, Map<string, ElementSpec>>;
}

export type FakeState = Map<NftFamily, FakeTable>;

function chainRefs(text: string): string[] {
  return [...text.matchAll(/\b(?:goto|jump) ([A-Za-z][\w./-]*)/g)].map((m) => m[1]!);
}

function setRefs(text: string): string[] {
  return [...text.matchAll(/@([A-Za-z][\w./-]*)/g)].map((m) => m[1]!);
}

function table(state: FakeState, family: NftFamily): FakeTable {
  const t = state.get(family);
  if (!t) throw new Error(`no table ${family} kproxy`);
  return t;
}

function referencesTo(t: FakeTable, name: string, refs: (text: string) => string[]): string[] {
  const users: string[] = [];
  for (const [chain, { rules }] of t.chains) {
    if (rules.some((r) => refs(r).includes(name))) users.push(`chain ${chain}`);
  }
  for (const [set, elements] of t.elements) {
    for (const e of elements.values())
      if (e.value && refs(e.value).includes(name)) users.push(`element of ${set}`);
  }
  return users;
}

function apply(state: FakeState, op: NftOp): void {
  switch (op.object) {
    case 'table':
      if (op.verb === 'add') {
        if (!state.has(op.family))
          state.set(op.family, { sets: new Map(), chains: new Map(), elements: new Map() });
      } else {
        table(state, op.family);
        state.delete(op.family);
      }
      return;
    case 'chain': {
      const t = table(state, op.family);
      if (op.verb === 'add') {
        if (!t.chains.has(op.chain.name)) t.chains.set(op.chain.name, { spec: op.chain, rules: [] });
        return;
      }
      const chain = t.chains.get(op.name);
      if (!chain) throw new Error(`${op.verb} chain ${op.name}: no such chain`);
      if (op.verb === 'flush') chain.rules = [];
      else {
        if (chain.rules.length > 0) throw new Error(`delete chain ${op.name}: not empty`);
        const users = referencesTo(t, op.name, chainRefs);
        if (users.length > 0) throw new Error(`delete chain ${op.name}: still used by ${users.join(', ')}`);
        t.chains.delete(op.name);
      }
      return;
    }
    case 'set': {
      const t = table(state, op.family);
      if (op.verb === 'add') {
        if (t.sets.has(op.set.name)) throw new Error(`add set ${op.set.name}: exists`);
        t.sets.set(op.set.name, op.set);
        t.elements.set(op.set.name, new Map());
        return;
      }
      if (!t.sets.has(op.name)) throw new Error(`delete set ${op.name}: no such set`);
      const users = referencesTo(t, op.name, setRefs);
      if (users.length > 0) throw new Error(`delete set ${op.name}: still used by ${users.join(', ')}`);
      t.sets.delete(op.name);
      t.elements.delete(op.name);
      return;
    }
    case 'rule': {
      const t = table(state, op.family);
      const chain = t.chains.get(op.chain);
      if (!chain) throw new Error(`add rule: no chain ${op.chain}`);
      for (const ref of chainRefs(op.rule))
        if (!t.chains.has(ref)) throw new Error(`rule jumps to missing ${ref}`);
      for (const ref of setRefs(op.rule))
        if (!t.sets.has(ref)) throw new Error(`rule uses missing set ${ref}`);
      chain.rules.push(op.rule);
      return;
    }
    case 'element': {
      const t = table(state, op.family);
      const elements = t.elements.get(op.set);
      if (!elements) throw new Error(`${op.verb} element: no set ${op.set}`);
      for (const e of op.elements) {
        if (op.verb === 'delete') {
          if (!elements.delete(e.key)) throw new Error(`delete element ${op.set} ${e.key}: missing`);
          continue;
        }
        if (elements.has(e.key)) throw new Error(`add element ${op.set} ${e.key}: exists`);
        for (const ref of chainRefs(e.value ?? '')) {
          if (!t.chains.has(ref)) throw new Error(`element ${e.key} jumps to missing ${ref}`);
        }
        elements.set(e.key, e);
      }
      return;
    }
  }
}

/** Applies all operations, or none (throwing) when one fails. */
export function applyTransaction(state: FakeState, ops: readonly NftOp[]): FakeState {
  const next: FakeState = structuredClone(state);
  for (const op of ops) apply(next, op);
  return next;
}

/** A canonical dump (sorted, creation order ignored) for comparing states. */
export function dump(state: FakeState): unknown {
  return [...state]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([family, t]) => ({
      family,
      sets: [...t.sets.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
      chains: [...t.chains.values()]
        .map((c) => ({ ...c.spec, rules: c.rules }))
        .sort((a, b) => (a.name < b.name ? -1 : 1)),
      elements: [...t.elements]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([set, e]) => [set, [...e.values()].sort((a, b) => (a.key < b.key ? -1 : 1))]),
    }));
}

/** Every operation of a plan's transactions, in order (they load as one script). */
export function planOps(plan: NftPlan): NftOp[] {
  const ops: NftOp[] = [];
  for (const tx of plan.transactions()) if (tx) ops.push(...tx.ops);
  return ops;
}
