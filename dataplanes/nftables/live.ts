// The live nftables dataplane: the only nftables code that touches the kernel. It is thin: the
// planner (planner.ts) says what to send, this runs it and keeps the record of what it committed.
//
// The record (the state last synced, with its fragment indexes) is what incremental syncs are
// planned against, never the kernel. The kernel is read only at start and before a full sync on a
// node that has our tables (adoption: the chain names, ~30 ms), for the cheap intact() check (the
// canary set), and in cleanup. A full sync on a node with our tables rewrites them in place
// (dynamic sets, i.e. affinity, keep their elements), falling back to replacing the tables; only
// an empty node gets planFull's cold start. Any failed incremental transaction falls back to a
// full sync; a failed full sync leaves the previous ruleset in place (nft transactions are
// atomic) and forgets the record, so the sync loop's retry is full again.

import type { IPFamily } from '../../contract/base/ip-family.ts';
import { runInSlices, Slicer } from '../../contract/base/work-slices.ts';
import type {
  CleanupCommand,
  DataplaneLog,
  LiveDataplane,
  SyncKind,
  SyncOutcome,
} from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import { type NftTableDeletion, nftTableDeletion, removedObjects } from '../shared/cleanup-commands.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { UdpConntrackReconciler } from '../shared/conntrack/udp-conntrack-reconciler.ts';
import {
  type ExpectedObjects,
  intactCheckScript,
  intactValuesScript,
} from '../shared/nft/intact-check-script.ts';
import { type NetlinkElementWriter, writeSplit } from '../shared/nft/netlink-elements.ts';
import { CANARY_SET, type DesiredRuleset, FAMILIES, type FamilyRuleset } from '../shared/nft/ruleset.ts';
import { type NftFamily, type NftTransaction, TABLE } from '../shared/nft/transaction.ts';
import { adoptTable, canaryNonce } from './adopt.ts';
import { COLD_START_CHUNK } from './cold-start-chunk.ts';
import type { SlotRecord } from './endpoint-slots.ts';
import { FragmentIndex } from './fragment-index.ts';
import { IntactSampler } from './intact-check.ts';
import type { NftRunner } from './nft-runner.ts';
import { incrementalPlanSteps, type NftPlan, planFull, planInPlace } from './planner.ts';
import { type EndpointHash, endpointHashApplier } from './scheduler.ts';

export type NftablesLog = DataplaneLog;

export interface NftablesDataplaneOptions {
  readonly nft: NftRunner;
  /**
   * A cold start with more elements than this is built, rendered and written in transactions of
   * about this size (default 100k: at 30k services x 10 endpoints, nft peaks at ~210 MB per
   * transaction instead of ~740 MB, in about the same total time, and kproxy never holds the
   * whole ruleset or its script).
   */
  readonly coldStartChunk?: number;
  /** Runs `conntrack` for the stale UDP flow reconciler. */
  readonly commands: CommandRunner;
  readonly log?: NftablesLog;
  /**
   * Writes transactions' elements as nf_tables netlink batches (netlink-elements.ts) in this
   * process's network namespace; absent: every transaction goes to nft whole.
   */
  readonly elements?: NetlinkElementWriter;
  /** How endpoints are picked (scheduler.ts); absent: at random. */
  readonly endpointHash?: EndpointHash;
}

interface CommittedRecord {
  /**
   * Only after adoption at start, when there is no state: the first sync rewrites it in place.
   * Otherwise the planner derives it from `state` when needed (a diff): keeping it would double
   * the memory the fragment indexes already take.
   */
  readonly desired?: DesiredRuleset;
  /** Absent after adoption: what the earlier run synced is unknown. */
  readonly state?: DualStackState;
  /**
   * Built after the sync that made the record returns (the rules are in the kernel by then; the
   * indexes only make later incremental syncs fast): the next incremental sync waits for them.
   */
  readonly indexes: Promise<Map<NftFamily, FragmentIndex | 'collisions'>>;
  /**
   * Where the endpoints of `state` are in their maps where not in the model's order
   * (endpoint-slots.ts): empty after a full sync, updated by each incremental plan's commit.
   */
  readonly slots: Map<NftFamily, SlotRecord>;
  readonly objectCount: number;
}

const MODEL_FAMILY: Readonly<Record<NftFamily, IPFamily>> = { ip: 'IPv4', ip6: 'IPv6' };

/**
 * Bytes a cold start's element takes in a batch, on average with room to spare: an endpoint 44
 * (IPv6 68), a commented dispatch element ~110, a piece's chains and messages' headers aside.
 */
export const ELEMENT_BYTES_BOUND = 96;

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

export class NftablesDataplane implements LiveDataplane {
  readonly mode = 'nftables';
  readonly #nft: NftRunner;
  readonly #conntrack: UdpConntrackReconciler;
  readonly #log: NftablesLog;
  #record: CommittedRecord | undefined;
  /** The nonce the last full sync put in every table's canary set: a table without it was
   * deleted, flushed or replaced by someone else. */
  #nonce: number | undefined;
  /** start() or cleanup() found/left no table of ours: the next full sync is a cold start. */
  #noTables = false;
  /** Full syncs in this process: the canary nonce of each (render's is the first's, FIRST_NONCE). */
  #fullSyncs = 0;
  #background: Promise<void> = Promise.resolve();
  /** What each intact() check verifies beyond the fixed objects, in turns. */
  readonly #sampler = new IntactSampler();
  readonly #coldStartChunk: number;
  readonly #elements: NetlinkElementWriter | undefined;
  readonly #withEndpointHash: (state: DualStackState) => DualStackState;

  constructor(options: NftablesDataplaneOptions) {
    this.#nft = options.nft;
    this.#withEndpointHash = endpointHashApplier(options.endpointHash);
    this.#elements = options.elements;
    this.#log = options.log ?? (() => {});
    this.#conntrack = new UdpConntrackReconciler(options.commands, this.#log);
    // With the element writer, a cold start's piece is one batch: it fits one datagram, which a
    // send buffer under 938 KiB (net.core.wmem_max under 469 KiB: Debian's default, 208 KiB,
    // gives ~4,400 elements) makes smaller than render --chunks prints.
    const datagramChunk = options.elements && Math.floor(options.elements.maxBytes / ELEMENT_BYTES_BOUND);
    this.#coldStartChunk = options.coldStartChunk ?? Math.min(COLD_START_CHUNK, datagramChunk ?? Infinity);
  }

  /** Ends the nft session this dataplane keeps (NftRunner.close): for owners that drop it early. */
  close(): void {
    this.#nft.close?.();
  }

  async start(): Promise<void> {
    const desired = await this.#adopt();
    if (!desired) {
      this.#noTables = true;
      this.#log('nftables: no table from an earlier run');
      return;
    }
    const nonces = new Set<number | undefined>();
    for (const family of FAMILIES) {
      if (desired[family]) nonces.add(canaryNonce(await this.#nft.listSetJson(family, CANARY_SET)));
    }
    this.#record = { desired, indexes: Promise.resolve(new Map()), slots: new Map(), objectCount: 0 };
    this.#nonce = nonces.size === 1 ? [...nonces][0] : undefined;
    this.#log('nftables: adopted the tables of an earlier run', {
      chains: FAMILIES.reduce((n, f) => n + (desired[f]?.chains.size ?? 0), 0),
    });
  }

  /** Our tables as adopt.ts reads them (chain names); undefined when there is none. */
  async #adopt(): Promise<DesiredRuleset | undefined> {
    const desired: { ip?: FamilyRuleset; ip6?: FamilyRuleset } = {};
    // Both nft runs start at once: starting one is a synchronous fork on the event loop, and the
    // daemon starts them before its listeners accept (daemon.ts).
    const listed = await Promise.all(FAMILIES.map((family) => this.#nft.listChainsJson(family)));
    FAMILIES.forEach((family, i) => {
      const adopted = adoptTable(family, listed[i]);
      if (adopted) desired[family] = adopted;
    });
    return desired.ip || desired.ip6 ? desired : undefined;
  }

  async sync(
    modelState: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    const state = this.#withEndpointHash(modelState);
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
      await this.#syncFull(state, record?.desired);
      ran = 'full';
    }
    const conntrack = await this.#conntrack.afterSync(state, ran, changed);
    return { kind: ran, objectCount: this.#record?.objectCount ?? 0, conntrack };
  }

  /** `nft -c` transactions naming what must be there, and how (intact-check.ts): bounded at any size. */
  async intact(): Promise<boolean> {
    const record = this.#record;
    if (!record || this.#nonce === undefined) return false;
    const expected: ExpectedObjects[] = [];
    for (const family of FAMILIES) {
      const state = record.state?.[MODEL_FAMILY[family]];
      if (state) {
        // Service ports' own objects only when a fragment index exists (intact-check.ts).
        const index = (await record.indexes).get(family);
        const slots = index instanceof FragmentIndex ? (record.slots.get(family) ?? new Map()) : undefined;
        expected.push(this.#sampler.next(family, state, slots));
      } else if (record.desired?.[family]) {
        expected.push({ family, ruleCounts: new Map(), elements: new Map() });
      }
    }
    const options = { nonce: this.#nonce };
    if (!(await this.#nft.check(intactCheckScript(expected, options)))) return false;
    const values = intactValuesScript(expected, options);
    if (values !== undefined && !(await this.#nft.check(values))) return false;
    for (const probe of expected.flatMap((e) => this.#sampler.extraRuleProbes(e))) {
      if (await this.#nft.check(probe)) return false;
    }
    return true;
  }

  async cleanup(): Promise<readonly string[]> {
    const commands = await this.#tableDeletions();
    for (const command of commands) await this.#nft.run(command.input);
    const removed = removedObjects(commands);
    this.#record = undefined;
    this.#nonce = undefined;
    this.#noTables = true;
    return removed;
  }

  cleanupCommands(): Promise<readonly CleanupCommand[]> {
    return this.#tableDeletions();
  }

  /** Our tables' deletions, of those that exist. */
  async #tableDeletions(): Promise<NftTableDeletion[]> {
    const deletions = FAMILIES.map((family) => nftTableDeletion(family, TABLE));
    const exist = await Promise.all(deletions.map((deletion) => this.#nft.check(deletion.input)));
    return deletions.filter((_, i) => exist[i]);
  }

  /** An incremental sync planned from the record; undefined when only a full sync will do. */
  async #syncAgainstRecord(
    record: CommittedRecord,
    state: DualStackState,
    kind: SyncKind,
    changed: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<SyncKind | undefined> {
    if (kind === 'full' || !record.state) return undefined;
    const plan = await runInSlices(
      incrementalPlanSteps(record.state, state, {
        indexes: await record.indexes,
        slots: record.slots,
        changed,
        nonce: this.#nonce,
        objectsBefore: record.objectCount,
      }),
    );
    const objectCount = await this.#apply(plan);
    // Fragments keep the indexes up to date (plan.commit); after a diff they are built anew.
    const indexes = plan.kind === 'fragments' ? record.indexes : this.#inBackground(state);
    this.#record = { state, indexes, slots: record.slots, objectCount };
    return 'incremental';
  }

  /**
   * In place on a node that has our tables (`adopted` at start, else read now), falling back to
   * replacing them; planFull's cold start on an empty node only: on a node with our tables, one in
   * pieces would leave services unreachable until their piece is written.
   */
  async #syncFull(state: DualStackState, adoptedAtStart: DesiredRuleset | undefined): Promise<void> {
    this.#record = undefined;
    const nonce = ++this.#fullSyncs;
    const adopted = adoptedAtStart ?? (this.#noTables ? undefined : await this.#adopt());
    let objectCount: number | undefined;
    if (adopted) {
      try {
        objectCount = await this.#apply(planInPlace(adopted, state, nonce));
      } catch (error) {
        if (!(error instanceof DataplaneError)) throw error;
        this.#log('nftables: rewriting the tables in place failed, falling back to replacing them', {
          error: String(error),
        });
      }
    }
    objectCount ??= await this.#apply(
      planFull(state, { nonce, coldStartChunk: adopted ? Number.POSITIVE_INFINITY : this.#coldStartChunk }),
    );
    this.#noTables = false;
    this.#nonce = nonce;
    // The indexes are built once the rules are written, not meanwhile: beside nft on two cores,
    // their allocations slowed nft by more than they would have saved.
    this.#record = { state, indexes: this.#inBackground(state), slots: new Map(), objectCount };
  }

  /**
   * Runs the plan's transactions in order, planning in slices; returns its object count. A
   * transaction is built while nft writes the one before it (a cold start's pieces: the two take
   * about as long, and nft runs on another core); each is garbage once written (bounded memory).
   */
  async #apply(plan: NftPlan): Promise<number> {
    const steps = plan.transactions();
    const slicer = new Slicer();
    let inFlight: Promise<void> = Promise.resolve();
    let transactions = 0;
    let objectCount: number;
    try {
      for (;;) {
        const step = steps.next();
        if (step.done) {
          objectCount = step.value;
          break;
        }
        await slicer.pause();
        if (step.value === undefined) continue;
        const split = this.#elements?.split(step.value);
        const batch = split && (await runInSlices(this.#elements!.batchSteps(split)));
        const script = batch ? undefined : await scriptInSlices(step.value, slicer);
        await inFlight;
        inFlight = batch
          ? writeSplit(this.#elements!, split!, batch, (text) => this.#nft.run(text))
          : this.#nft.run(script!);
        // Handled where it is awaited; meanwhile a refusal is not an unhandled rejection.
        inFlight.catch(() => {});
        transactions++;
      }
      await inFlight;
    } finally {
      // Never return with a transaction still being written, even when building the next failed.
      await inFlight.catch(() => {});
    }
    plan.commit?.();
    if (plan.kind === 'cold-start')
      this.#log('nftables: cold start in bounded transactions', { transactions });
    return objectCount;
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
}
