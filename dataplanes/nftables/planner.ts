// The nftables planner: what the live dataplane sends, exactly as the dry-run prints it.
//
// A plan is the nft transactions of one sync, in order (each one `nft -f` run):
// - full on an empty node: the whole ruleset and the canary in one transaction, or, past
//   `coldStartChunk` elements, a cold start in pieces (cold-start.ts) and the canary last;
// - in place: a full sync on a node that has our tables (adopt.ts): chains and maps flushed and
//   refilled in one transaction, dynamic sets (affinity) kept, stale chains deleted;
// - incremental: the fragments of the changed service ports (fragment-index.ts) when they apply,
//   else the diff of the two whole rulesets.
// The live dataplane runs the planning steps in slices (work-slices.ts); render runs them through.

import { isDeepStrictEqual } from 'node:util';
import { compareText } from '../../contract/base/compare-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { runAll, type Steps } from '../../contract/base/work-slices.ts';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { DualStackState, NodeSettings, ServicePortKey } from '../../contract/proxy-state.ts';
import { printInputs, type ToolInput } from '../../contract/tool-inputs.ts';
import { diffFamily, diffRulesetsSteps } from '../shared/nft/diff.ts';
import { fullTransaction } from '../shared/nft/full-transaction.ts';
import { CANARY_SET, type DesiredRuleset, FAMILIES, type FamilyRuleset } from '../shared/nft/ruleset.ts';
import { type NftFamily, NftTransaction } from '../shared/nft/transaction.ts';
import { coldStartTransactions } from './cold-start.ts';
import { COLD_START_CHUNK } from './cold-start-chunk.ts';
import { desiredRulesetSteps, type FamilySlots } from './desired-ruleset.ts';
import {
  commitSlots,
  type EndpointChanges,
  type SlotRecord,
  type SlotTable,
  type SlotUpdates,
  slotUpdates,
  updatedSlots,
} from './endpoint-slots.ts';
import { FragmentIndex, type FragmentPlan } from './fragment-index.ts';
import { endpointHashApplier, schedulerChoice } from './scheduler.ts';

export type NftPlanKind = 'cold-start' | 'one-transaction' | 'in-place' | 'fragments' | 'diff';

export interface NftPlan {
  readonly kind: NftPlanKind;
  /**
   * The transactions in the order they are run, built as they are read: a cold start's piece is
   * garbage once its reader dropped it. Undefined is yielded where a reader may give way
   * to the event loop. Returns the rules plus elements our tables hold afterwards (for the
   * metrics; a fragments plan counts from `objectsBefore`). Each call starts over.
   */
  transactions(): Generator<NftTransaction | undefined, number, void>;
  /**
   * Once every transaction is applied: the fragment indexes and endpoint slots the plan came from
   * learn the change.
   */
  readonly commit?: () => void;
}

/** The canary nonce of the first full sync (render's; the live dataplane counts its full syncs). */
export const FIRST_NONCE = 1;

export interface FullPlanOptions {
  /** What the canary set holds after the sync: intact() names it. */
  readonly nonce?: number;
  /** Infinity: one transaction whatever the size (a node that has our tables: see live.ts). */
  readonly coldStartChunk?: number;
}

export interface IncrementalPlanOptions {
  /** Fragment indexes of `prev` by family (the live record's); missing ones are built and added. */
  readonly indexes?: Map<NftFamily, FragmentIndex | 'collisions'>;
  /**
   * Where `prev`'s endpoints are in their maps, by family (endpoint-slots.ts): the live record's,
   * which the plan's commit updates. Absent: in the model's order, as a full sync leaves them.
   */
  readonly slots?: Map<NftFamily, SlotRecord>;
  /** The service ports that differ, when the caller knows (else the states are compared). */
  readonly changed?: ReadonlySet<ServicePortKey>;
  /** The canary nonce, for the table of a family that appears. */
  readonly nonce?: number;
  /** The object count before the plan, which a fragments plan counts from. */
  readonly objectsBefore?: number;
}

const MODEL_FAMILY: Readonly<Record<NftFamily, IPFamily>> = { ip: 'IPv4', ip6: 'IPv6' };

export interface NftablesPlannerOptions {
  /** kube-proxy's ipvs.scheduler: its nftables counterpart (scheduler.ts); absent or rr: at random. */
  readonly scheduler?: string;
}

/** The planner render uses; the live dataplane given the same scheduler sends what it prints. */
export function createNftablesPlanner(options: NftablesPlannerOptions = {}): DataplanePlanner<NftPlan> {
  const withHash = endpointHashApplier(schedulerChoice(options.scheduler).endpointHash);
  return {
    mode: 'nftables',
    planFull: (state) => planFull(withHash(state)),
    planIncremental: (prev, next) => runAll(incrementalPlanSteps(withHash(prev), withHash(next))),
    inputs: (plan) => planInputs(plan, false),
    render: (plan) => printInputs(planInputs(plan, false)),
    chunkInputs: (plan) => planInputs(plan, true),
    renderChunks: (plan) => printInputs(planInputs(plan, true)),
  };
}

export const nftablesPlanner: DataplanePlanner<NftPlan> = createNftablesPlanner();

/** The full sync of an empty node. */
export function planFull(state: DualStackState, options: FullPlanOptions = {}): NftPlan {
  const nonce = options.nonce ?? FIRST_NONCE;
  const chunk = options.coldStartChunk ?? COLD_START_CHUNK;
  if (estimatedElements(state) > chunk) {
    return { kind: 'cold-start', transactions: () => coldStartSteps(state, chunk, nonce) };
  }
  return {
    kind: 'one-transaction',
    *transactions() {
      const desired = yield* paused(desiredRulesetSteps(state));
      const tx = fullTransaction(desired);
      withCanary(
        tx,
        FAMILIES.filter((f) => desired[f]),
        nonce,
      );
      yield tx;
      return objectCount(desired);
    },
  };
}

/**
 * The full sync of a node holding `adopted` (adopt.ts): one transaction that rewrites every chain
 * and refills every map in place; no table is replaced, so dynamic sets keep their elements.
 */
export function planInPlace(adopted: DesiredRuleset, state: DualStackState, nonce: number): NftPlan {
  return {
    kind: 'in-place',
    *transactions() {
      const desired = yield* paused(desiredRulesetSteps(state));
      const tx = yield* paused(diffRulesetsSteps(adopted, desired));
      const families = FAMILIES.filter((f) => desired[f]);
      for (const family of families) tx.flushSet(family, 'set', CANARY_SET);
      withCanary(tx, families, nonce);
      yield tx;
      return objectCount(desired);
    },
  };
}

/** What takes a node holding planFull(prev) to the ruleset of `next`: fragments, else a diff. */
export function* incrementalPlanSteps(
  prev: DualStackState,
  next: DualStackState,
  options: IncrementalPlanOptions = {},
): Steps<NftPlan> {
  const slots = slotsPlan(prev, next, options);
  const fragments = yield* fragmentsPlanSteps(prev, next, slots, options);
  if (fragments) return fragments;
  const nonce = options.nonce ?? FIRST_NONCE;
  return {
    kind: 'diff',
    *transactions() {
      const before = yield* paused(desiredRulesetSteps(prev, slots.before));
      const after = yield* paused(desiredRulesetSteps(next, slots.after));
      const tx = yield* paused(diffRulesetsSteps(before, after));
      // The table of a family that appears is new: it gets the canary too.
      withCanary(
        tx,
        FAMILIES.filter((f) => after[f] && !before[f]),
        nonce,
      );
      if (!tx.empty) yield tx;
      return objectCount(after);
    },
    commit: slots.commit,
  };
}

const NO_SLOTS: SlotTable = new Map();

/** Where each family's endpoints are before and after an incremental plan (endpoint-slots.ts). */
interface SlotsPlan {
  readonly before: FamilySlots;
  readonly after: FamilySlots;
  /**
   * The changed service ports of each family in both states, in key order: the fragments are
   * written in this order, so the daemon (given the keys of its round) and render (finding them by
   * changedServicePorts, in map order) write the same bytes.
   */
  readonly changed: ReadonlyMap<NftFamily, readonly ServicePortKey[]>;
  /** Of those, each family's whose endpoints alone changed (endpoint-slots.ts). */
  readonly endpointChanges: ReadonlyMap<NftFamily, ReadonlyMap<ServicePortKey, EndpointChanges>>;
  /** Once the plan is applied: the record (options.slots) learns the new slots. */
  readonly commit: () => void;
}

/** A family that appears or goes has no slots: its table is written or deleted whole. */
function slotsPlan(prev: DualStackState, next: DualStackState, options: IncrementalPlanOptions): SlotsPlan {
  const record = options.slots ?? new Map<NftFamily, SlotRecord>();
  const before = new Map<NftFamily, SlotTable>();
  const after = new Map<NftFamily, SlotTable>();
  const changed = new Map<NftFamily, readonly ServicePortKey[]>();
  const updates = new Map<NftFamily, SlotUpdates>();
  const endpointChanges = new Map<NftFamily, ReadonlyMap<ServicePortKey, EndpointChanges>>();
  for (const family of FAMILIES) {
    const b = prev[MODEL_FAMILY[family]];
    const a = next[MODEL_FAMILY[family]];
    const current = record.get(family) ?? NO_SLOTS;
    before.set(family, current);
    if (!b || !a) continue;
    const keys = [...(options.changed ?? changedServicePorts(b, a))].sort(compareText);
    const update = slotUpdates(b, a, keys, current);
    changed.set(family, keys);
    updates.set(family, update.updates);
    endpointChanges.set(family, update.changes);
    after.set(family, updatedSlots(current, update.updates));
  }
  return {
    before,
    after,
    changed,
    endpointChanges,
    commit: () => {
      for (const family of FAMILIES) {
        const update = updates.get(family);
        if (!update) {
          record.delete(family);
          continue;
        }
        const table = record.get(family) ?? new Map();
        record.set(family, table);
        commitSlots(table, update);
      }
    },
  };
}

/**
 * The fragments of the changed service ports; undefined when they do not apply (a family or the
 * node settings changed, ports collide). Keys of the other family find no ports and cost nothing.
 */
function* fragmentsPlanSteps(
  prev: DualStackState,
  next: DualStackState,
  slots: SlotsPlan,
  options: IncrementalPlanOptions,
): Steps<NftPlan | undefined> {
  const indexes = options.indexes ?? new Map<NftFamily, FragmentIndex | 'collisions'>();
  const tx = new NftTransaction();
  const plans: FragmentPlan[] = [];
  let delta = 0;
  for (const family of FAMILIES) {
    const before = prev[MODEL_FAMILY[family]];
    const after = next[MODEL_FAMILY[family]];
    if (!before && !after) continue;
    if (!before || !after || !sameNode(before.node, after.node)) return undefined;
    const changed = slots.changed.get(family)!;
    if (changed.length === 0) continue;
    let index = indexes.get(family);
    if (index === undefined) {
      index = (yield* FragmentIndex.buildSteps(family, before)) ?? 'collisions';
      indexes.set(family, index);
    }
    if (index === 'collisions') return undefined;
    const ports = (s: typeof before) => changed.flatMap((key) => s.servicePorts.get(key) ?? []);
    const plan = index.plan(
      ports(before),
      ports(after),
      slots.before.get(family),
      slots.after.get(family),
      slots.endpointChanges.get(family),
    );
    if (!plan) return undefined;
    diffFamily(tx, plan.before, plan.after);
    plans.push(plan);
    delta += familyObjects(plan.after) - familyObjects(plan.before);
  }
  const objects = (options.objectsBefore ?? 0) + delta;
  return {
    kind: 'fragments',
    *transactions() {
      if (!tx.empty) yield tx;
      return objects;
    },
    commit: () => {
      for (const plan of plans) plan.commit();
      slots.commit();
    },
  };
}

/**
 * The model keeps a family's node settings object while they do not change: compared deeply only
 * when it made new ones.
 */
function sameNode(a: NodeSettings, b: NodeSettings): boolean {
  return a === b || isDeepStrictEqual(a, b);
}

/**
 * The cold start's pieces, then the canary: a cold start cut short is not intact. Gives way
 * between service ports.
 */
function* coldStartSteps(
  state: DualStackState,
  chunk: number,
  nonce: number,
): Generator<NftTransaction | undefined, number, void> {
  let count = 0;
  for (const tx of coldStartTransactions(state, chunk)) {
    if (tx !== undefined) count += transactionObjects(tx);
    yield tx;
  }
  yield withCanary(
    new NftTransaction(),
    FAMILIES.filter((f) => state[MODEL_FAMILY[f]]),
    nonce,
  );
  return count;
}

/** Steps (work-slices.ts) as a transactions generator runs them: pausing yields undefined. */
function* paused<T>(steps: Steps<T>): Generator<undefined, T, void> {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    yield undefined;
  }
}

function withCanary(tx: NftTransaction, families: readonly NftFamily[], nonce: number): NftTransaction {
  for (const family of families) tx.addElements(family, CANARY_SET, [{ key: `${nonce}` }]);
  return tx;
}

/**
 * The plan's transactions as one script (they load as one: `nft -f`), or with `chunks` each apart
 * under a `#` line naming it. A plan sent as several transactions says so in a first `#` line.
 */
function planInputs(plan: NftPlan, chunks: boolean): ToolInput[] {
  const scripts: string[] = [];
  for (const tx of plan.transactions()) if (tx !== undefined) scripts.push(tx.toString());
  if (chunks) {
    return scripts.map((input, i) => ({
      title: `nft -f transaction ${i + 1}/${scripts.length} (${plan.kind})`,
      command: NFT_COMMAND,
      input,
    }));
  }
  const note =
    scripts.length > 1
      ? {
          title: `the live dataplane sends this ${plan.kind} as ${scripts.length} nft transactions: render --chunks`,
        }
      : {};
  return [{ ...note, command: NFT_COMMAND, input: scripts.join('') }];
}

/** How a person loads an nft script from stdin. */
const NFT_COMMAND = 'nft -f -';

function familyObjects(ruleset: FamilyRuleset | undefined): number {
  let count = 0;
  for (const chain of ruleset?.chains.values() ?? []) count += chain.rules.length;
  for (const elements of ruleset?.elements.values() ?? []) count += elements.size;
  return count;
}

/** Rules plus elements: what the rule-count metrics report. */
export function objectCount(desired: DesiredRuleset): number {
  return FAMILIES.reduce((sum, family) => sum + familyObjects(desired[family]), 0);
}

/** Rules plus elements added by a transaction (one that only adds). */
function transactionObjects(tx: NftTransaction): number {
  let count = 0;
  for (const op of tx.ops) {
    if (op.object === 'rule') count++;
    else if (op.object === 'element') count += op.elements.length;
  }
  return count;
}

/**
 * About one element per endpoint and one per service port (a lower bound): whether a cold start
 * is large enough to be written in pieces.
 */
function estimatedElements(state: DualStackState): number {
  let count = 0;
  for (const familyState of [state.IPv4, state.IPv6]) {
    for (const sp of familyState?.servicePorts.values() ?? []) count += 1 + sp.clusterEndpoints.length;
  }
  return count;
}
