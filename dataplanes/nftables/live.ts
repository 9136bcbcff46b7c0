// The live nftables dataplane: the only nftables code that touches the kernel.
//
// It keeps a record of what it committed (the desired ruleset and the state it came from) and
// plans incremental syncs against that record, never against the kernel. It reads the kernel
// only at start (adoption), for the cheap intact() check (the canary set), and in cleanup.
// Any failed incremental transaction falls back to a full one; a failed full transaction leaves
// the previous ruleset in place (nft transactions are atomic) and forgets the record, so the
// sync loop's retry is full again.
//
// An incremental sync takes the fastest path that is right: the fragments of the changed service
// ports (fragment-index.ts), else a diff of the whole desired rulesets, else a full sync.

import { randomInt } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { changedServicePorts } from '../../src/model/changed-service-ports.ts';
import type {
  DualStackState,
  IPFamily,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../src/model/proxy-state.ts';
import { runInSlices, Slicer } from '../../src/model/work-slices.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../shared/dataplane.ts';
import { DataplaneError } from '../shared/dataplane-error.ts';
import { deleteStaleUdpFlows, staleUdpFlowDeletions } from '../shared/udp-conntrack-cleanup.ts';
import {
  type AdoptedUdpEndpoints,
  adoptTable,
  adoptUdpEndpoints,
  canaryNonce,
  UDP_ENDPOINT_MAPS,
  udpStateBefore,
} from './adopt.ts';
import { CANARY_SET } from './base-objects.ts';
import { desiredRulesetSteps } from './desired-ruleset.ts';
import { diffFamily, diffRulesetsSteps } from './diff.ts';
import { FragmentIndex } from './fragment-index.ts';
import { coldStartTransactions, fullTransaction } from './full-transaction.ts';
import { type ExpectedObjects, IntactSampler, intactCheckScript } from './intact-check.ts';
import type { NftRunner } from './nft-runner.ts';
import { type DesiredRuleset, FAMILIES, type FamilyRuleset } from './ruleset.ts';
import { type NftFamily, NftTransaction, TABLE } from './transaction.ts';

export type NftablesLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

export interface NftablesDataplaneOptions {
  readonly nft: NftRunner;
  /**
   * A cold start with more elements than this is built, rendered and written in transactions of
   * about this size (default 100k: at 30k services x 10 endpoints, nft peaks at ~210 MB per
   * transaction instead of ~740 MB, in about the same total time, and kproxy never holds the
   * whole ruleset or its script).
   */
  readonly coldStartChunk?: number;
  /** Runs `conntrack` for the stale UDP flow cleanup. */
  readonly commands: CommandRunner;
  readonly log?: NftablesLog;
}

interface CommittedRecord {
  /**
   * Only after adoption, when there is no state. Otherwise derived from `state` when needed (a
   * node settings change): keeping it would double the memory the fragment indexes already take.
   */
  readonly desired?: DesiredRuleset;
  /** Absent after adoption: what the earlier run synced is unknown. */
  readonly state?: DualStackState;
  /** Only after adoption: the UDP endpoints the earlier run left, for the stale flow cleanup. */
  readonly udpBefore?: Partial<Record<NftFamily, AdoptedUdpEndpoints>>;
  /** Built after a full or diff sync; none after adoption (the next sync is a diff). */
  /**
   * Built after the sync that made the record returns (the rules are in the kernel by then; the
   * indexes only make later incremental syncs fast): the next incremental sync waits for them.
   */
  readonly indexes: Promise<Map<NftFamily, FragmentIndex | 'collisions'>>;
  readonly objectCount: number;
}

const MODEL_FAMILY: Readonly<Record<NftFamily, IPFamily>> = { ip: 'IPv4', ip6: 'IPv6' };

function familyObjects(ruleset: FamilyRuleset | undefined): number {
  let count = 0;
  for (const chain of ruleset?.chains.values() ?? []) count += chain.rules.length;
  for (const elements of ruleset?.elements.values() ?? []) count += elements.size;
  return count;
}

/**
 * Fragment indexes of a state just committed in full, so that the first incremental sync after it
 * is fast too: about 1 s at 30k services, next to a full sync of seconds.
 */
async function buildIndexes(state: DualStackState): Promise<Map<NftFamily, FragmentIndex | 'collisions'>> {
  const indexes = new Map<NftFamily, FragmentIndex | 'collisions'>();
  for (const family of FAMILIES) {
    const familyState = state[MODEL_FAMILY[family]];
    if (familyState) indexes.set(family, (await FragmentIndex.build(family, familyState)) ?? 'collisions');
  }
  return indexes;
}

/** The transaction's script, rendered in slices that give the event loop its turns. */
async function scriptInSlices(tx: NftTransaction, slicer = new Slicer()): Promise<string> {
  const parts: string[] = [];
  for (const part of tx.scriptParts()) {
    parts.push(part);
    await slicer.pause();
  }
  return parts.join('');
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

/** Rules plus elements: what the rule-count metrics report. */
export function objectCount(desired: DesiredRuleset): number {
  return FAMILIES.reduce((sum, family) => sum + familyObjects(desired[family]), 0);
}

/** The UDP ports of `next` as an earlier run left them (adopt.ts). */
function udpStatesBefore(
  udpBefore: Partial<Record<NftFamily, AdoptedUdpEndpoints>>,
  next: DualStackState,
): DualStackState {
  const states: { IPv4?: ProxyState; IPv6?: ProxyState } = {};
  for (const family of FAMILIES) {
    const adopted = udpBefore[family];
    const state = next[MODEL_FAMILY[family]];
    if (adopted && state) states[MODEL_FAMILY[family]] = udpStateBefore(adopted, state);
  }
  return states;
}

/** The state restricted to `keys` (stale flows are found port by port). */
function onlyPorts(state: ProxyState, keys: ReadonlySet<ServicePortKey>): ProxyState {
  const servicePorts = new Map<ServicePortKey, ServicePort>();
  for (const key of keys) {
    const sp = state.servicePorts.get(key);
    if (sp) servicePorts.set(key, sp);
  }
  return { ...state, servicePorts };
}

export class NftablesDataplane implements LiveDataplane {
  readonly mode = 'nftables';
  readonly #nft: NftRunner;
  readonly #commands: CommandRunner;
  readonly #log: NftablesLog;
  #record: CommittedRecord | undefined;
  /** The nonce the last full sync put in every table's canary set: a table without it was
   * deleted, flushed or replaced by someone else. */
  #nonce: number | undefined;
  /** start() or cleanup() found/left no table of ours: the next full sync is a cold start. */
  #noTables = false;
  #background: Promise<void> = Promise.resolve();
  /** What each intact() check verifies beyond the fixed objects, in turns. */
  readonly #sampler = new IntactSampler();
  readonly #coldStartChunk: number;

  constructor(options: NftablesDataplaneOptions) {
    this.#nft = options.nft;
    this.#commands = options.commands;
    this.#log = options.log ?? (() => {});
    this.#coldStartChunk = options.coldStartChunk ?? 100_000;
  }

  async start(): Promise<void> {
    const desired: { ip?: FamilyRuleset; ip6?: FamilyRuleset } = {};
    const udpBefore: Partial<Record<NftFamily, AdoptedUdpEndpoints>> = {};
    const nonces = new Set<number | undefined>();
    for (const family of FAMILIES) {
      const adopted = adoptTable(family, await this.#nft.listChainsJson(family));
      if (!adopted) continue;
      desired[family] = adopted;
      const maps = await Promise.all(
        UDP_ENDPOINT_MAPS.map((name) => this.#nft.listSetJson(family, name, 'map')),
      );
      udpBefore[family] = adoptUdpEndpoints(maps);
      nonces.add(canaryNonce(await this.#nft.listSetJson(family, CANARY_SET)));
    }
    if (!desired.ip && !desired.ip6) {
      this.#noTables = true;
      this.#log('nftables: no table from an earlier run');
      return;
    }
    this.#record = { desired, udpBefore, indexes: Promise.resolve(new Map()), objectCount: 0 };
    this.#nonce = nonces.size === 1 ? [...nonces][0] : undefined;
    this.#log('nftables: adopted the tables of an earlier run', {
      chains: FAMILIES.reduce((n, f) => n + (desired[f]?.chains.size ?? 0), 0),
    });
  }

  async sync(
    state: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    const record = this.#record;
    let ran: SyncKind | undefined;
    try {
      ran = record && (await this.#syncAgainstRecord(record, state, kind, changed));
    } catch (error) {
      // Anything but nft's refusal is a bug: the sync fails (the daemon reports it) and the record
      // it may have left half-updated is forgotten, so the loop's retry writes everything.
      if (!(error instanceof DataplaneError)) {
        this.#record = undefined;
        throw error;
      }
      this.#log('nftables: incremental sync failed, falling back to full', { error: String(error) });
    }
    if (ran === undefined) {
      await this.#syncFull(state);
      ran = 'full';
    }
    const conntrackEntriesDeleted = await this.#cleanStaleUdpFlows(
      record?.state ?? (record?.udpBefore && udpStatesBefore(record.udpBefore, state)),
      state,
      changed,
    );
    return { kind: ran, objectCount: this.#record?.objectCount ?? 0, conntrackEntriesDeleted };
  }

  /** One `nft -c` transaction naming what must be there (intact-check.ts): bounded at any size. */
  async intact(): Promise<boolean> {
    const record = this.#record;
    if (!record || this.#nonce === undefined) return false;
    const expected: ExpectedObjects[] = [];
    for (const family of FAMILIES) {
      const state = record.state?.[MODEL_FAMILY[family]];
      if (state) {
        // Service ports' own objects only when they do not collide (then a fragment index exists).
        const index = (await record.indexes).get(family);
        expected.push(this.#sampler.next(family, state, index instanceof FragmentIndex));
      } else if (record.desired?.[family]) {
        expected.push({ family, ruleCounts: new Map(), elements: new Map() });
      }
    }
    return this.#nft.check(intactCheckScript(expected, { nonce: this.#nonce }));
  }

  async cleanup(): Promise<void> {
    // `add` first makes the delete succeed whether or not the table exists.
    await this.#nft.run(
      FAMILIES.map((f) => `add table ${f} ${TABLE}\ndelete table ${f} ${TABLE}\n`).join(''),
    );
    this.#record = undefined;
    this.#nonce = undefined;
    this.#noTables = true;
  }

  /** A sync planned from the record, or undefined when only a full sync will do. */
  async #syncAgainstRecord(
    record: CommittedRecord,
    state: DualStackState,
    kind: SyncKind,
    changed: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<SyncKind | undefined> {
    // Right after adoption even a full sync is a diff: same result, no table replaced under traffic.
    const adopted = FAMILIES.some((f) => record.desired?.[f]?.adopted);
    if (kind === 'incremental' && !adopted && (await this.#syncFragments(record, state, changed)))
      return 'incremental';
    if (kind === 'full' && !adopted) return undefined;
    const count = await this.#writeDiff(record, state);
    if (count === undefined) return undefined;
    this.#record = { state, indexes: this.#inBackground(state), objectCount: count };
    return adopted ? 'full' : 'incremental';
  }

  async #syncFull(state: DualStackState): Promise<void> {
    this.#record = undefined;
    // The indexes are built once the rules are written, not meanwhile: beside nft on two cores,
    // their allocations slowed nft by more than they would have saved.
    const count = await this.#writeFull(state);
    this.#record = { state, indexes: this.#inBackground(state), objectCount: count };
  }

  /** The fragment indexes of `state`, built from now on; settled() waits for them. */
  #inBackground(state: DualStackState): Promise<Map<NftFamily, FragmentIndex | 'collisions'>> {
    // A failed build leaves no index: the next incremental sync builds the one it needs.
    const indexes = buildIndexes(state).catch(() => new Map<NftFamily, FragmentIndex | 'collisions'>());
    this.#background = indexes.then(() => undefined);
    return indexes;
  }

  /** Resolves once the work a sync left to do in the background (the fragment indexes) is done. */
  settled(): Promise<void> {
    return this.#background;
  }

  // #writeFull and #writeDiff are functions of their own so that the whole desired ruleset they
  // build (~80 MiB at 30k services x 10 endpoints) is garbage before the indexes are built.

  /** Writes the whole ruleset of `state`; returns its object count. */
  async #writeFull(state: DualStackState): Promise<number> {
    const nonce = randomInt(1, 2 ** 32);
    const count =
      this.#noTables && estimatedElements(state) > this.#coldStartChunk
        ? await this.#writeColdStart(state, nonce)
        : await this.#writeOneTransaction(state, nonce);
    this.#noTables = false;
    this.#nonce = nonce;
    return count;
  }

  async #writeOneTransaction(state: DualStackState, nonce: number): Promise<number> {
    const desired = await runInSlices(desiredRulesetSteps(state));
    const tx = fullTransaction(desired);
    for (const family of FAMILIES)
      if (desired[family]) tx.addElements(family, CANARY_SET, [{ key: `${nonce}` }]);
    await this.#nft.run(await scriptInSlices(tx));
    return objectCount(desired);
  }

  /**
   * In pieces, in order, each dropped once written (bounded memory). A piece is built while nft
   * writes the one before it: the two take about as long, and nft runs on another core.
   */
  async #writeColdStart(state: DualStackState, nonce: number): Promise<number> {
    let count = 0;
    let transactions = 0;
    let inFlight: Promise<void> = Promise.resolve();
    const slicer = new Slicer();
    try {
      for (const tx of coldStartTransactions(state, this.#coldStartChunk)) {
        // Between service ports and between pieces of the script, the event loop gets its turns.
        await slicer.pause();
        if (tx === undefined) continue;
        count += transactionObjects(tx);
        const script = await scriptInSlices(tx, slicer);
        await inFlight;
        inFlight = this.#nft.run(script);
        transactions++;
      }
      await inFlight;
    } finally {
      // Never return with a piece still being written, even when building the next one failed.
      await inFlight.catch(() => {});
    }
    // The canary goes in last: a cold start cut short is not intact.
    const canary = new NftTransaction();
    for (const family of FAMILIES)
      if (state[MODEL_FAMILY[family]]) canary.addElements(family, CANARY_SET, [{ key: `${nonce}` }]);
    await this.#nft.run(canary.toString());
    this.#log('nftables: cold start in bounded transactions', { transactions: transactions + 1 });
    return count;
  }

  /** Writes what takes the recorded ruleset to that of `state`; undefined when none is recorded. */
  async #writeDiff(record: CommittedRecord, state: DualStackState): Promise<number | undefined> {
    const prev = record.desired ?? (record.state && (await runInSlices(desiredRulesetSteps(record.state))));
    if (!prev) return undefined;
    const desired = await runInSlices(desiredRulesetSteps(state));
    const tx = await runInSlices(diffRulesetsSteps(prev, desired));
    // The table of a family that appears is new: give it the canary too.
    for (const family of FAMILIES) {
      if (desired[family] && !prev[family] && this.#nonce !== undefined) {
        tx.addElements(family, CANARY_SET, [{ key: `${this.#nonce}` }]);
      }
    }
    if (!tx.empty) await this.#nft.run(await scriptInSlices(tx));
    return objectCount(desired);
  }

  /**
   * The fragment path; false when it does not apply (then nothing was changed). `changed` (from
   * the model) saves comparing the states; keys of the other family find no ports and cost nothing.
   */
  async #syncFragments(
    record: CommittedRecord,
    state: DualStackState,
    changedKeys: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<boolean> {
    if (!record.state) return false;
    const tx = new NftTransaction();
    const commits: (() => void)[] = [];
    let delta = 0;
    for (const family of FAMILIES) {
      const prev = record.state[MODEL_FAMILY[family]];
      const next = state[MODEL_FAMILY[family]];
      if (!prev && !next) continue;
      if (!prev || !next || !isDeepStrictEqual(prev.node, next.node)) return false;
      const changed = changedKeys ?? changedServicePorts(prev, next);
      if (changed.size === 0) continue;
      const indexes = await record.indexes;
      let index = indexes.get(family);
      if (index === undefined) {
        index = (await FragmentIndex.build(family, prev)) ?? 'collisions';
        indexes.set(family, index);
      }
      if (index === 'collisions') return false;
      const ports = (s: typeof prev) => [...changed].flatMap((key) => s.servicePorts.get(key) ?? []);
      const plan = index.plan(ports(prev), ports(next));
      if (!plan) return false;
      diffFamily(tx, plan.before, plan.after);
      commits.push(plan.commit);
      delta += familyObjects(plan.after) - familyObjects(plan.before);
    }
    if (!tx.empty) await this.#nft.run(tx.toString());
    for (const commit of commits) commit();
    this.#record = { state, indexes: record.indexes, objectCount: record.objectCount + delta };
    return true;
  }

  /** With `changed`, only those ports are looked at (a scan of every port costs 2-20 ms at 30k). */
  async #cleanStaleUdpFlows(
    prev: DualStackState | undefined,
    next: DualStackState,
    changed: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<number> {
    let deleted = 0;
    for (const family of FAMILIES) {
      const state = next[MODEL_FAMILY[family]];
      if (!state) continue;
      const before = prev?.[MODEL_FAMILY[family]];
      const deletions =
        changed && before
          ? staleUdpFlowDeletions(onlyPorts(before, changed), onlyPorts(state, changed))
          : staleUdpFlowDeletions(before, state);
      if (deletions.length > 0) deleted += await deleteStaleUdpFlows(this.#commands, deletions);
    }
    return deleted;
  }
}
