// The live nftables dataplane: the only nftables code that touches the kernel.
//
// It keeps a record of what it committed (the desired ruleset and the state it came from) and
// plans incremental syncs against that record, never against the kernel. It reads the kernel
// only at start (adoption), for the cheap intact() check (table handles), and in cleanup.
// Any failed incremental transaction falls back to a full one; a failed full transaction leaves
// the previous ruleset in place (nft transactions are atomic) and forgets the record, so the
// sync loop's retry is full again.
//
// An incremental sync takes the fastest path that is right: the fragments of the changed service
// ports (fragment-index.ts), else a diff of the whole desired rulesets, else a full sync.
import { isDeepStrictEqual } from 'node:util';
import { changedServicePorts } from '../../src/model/changed-service-ports.ts';
import type { DualStackState, IPFamily } from '../../src/model/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../shared/dataplane.ts';
import { deleteStaleUdpFlows, staleUdpFlowDeletions } from '../shared/udp-conntrack-cleanup.ts';
import { adoptTable } from './adopt.ts';
import { desiredRuleset } from './desired-ruleset.ts';
import { diffFamily, diffRulesets } from './diff.ts';
import { FragmentIndex } from './fragment-index.ts';
import { fullTransaction } from './full-transaction.ts';
import type { NftRunner } from './nft-runner.ts';
import { type DesiredRuleset, FAMILIES, type FamilyRuleset } from './ruleset.ts';
import { type NftFamily, NftTransaction, TABLE } from './transaction.ts';

export type NftablesLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

export interface NftablesDataplaneOptions {
  readonly nft: NftRunner;
  /** Runs `conntrack` for the stale UDP flow cleanup. */
  readonly commands: CommandRunner;
  readonly log?: NftablesLog;
}

interface CommittedRecord {
  /** Absent after a fragment sync (not rebuilt, to stay fast): derived from `state` when needed. */
  readonly desired?: DesiredRuleset;
  /** Absent after adoption: what the earlier run synced is unknown. */
  readonly state?: DualStackState;
  /** Built on the first incremental sync that needs them; absent entry = not built yet. */
  readonly indexes: Map<NftFamily, FragmentIndex | 'collisions'>;
  readonly objectCount: number;
}

const MODEL_FAMILY: Readonly<Record<NftFamily, IPFamily>> = { ip: 'IPv4', ip6: 'IPv6' };

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

export class NftablesDataplane implements LiveDataplane {
  readonly mode = 'nftables';
  readonly #nft: NftRunner;
  readonly #commands: CommandRunner;
  readonly #log: NftablesLog;
  #record: CommittedRecord | undefined;
  /** Kernel handles of our tables after the last full sync: a changed handle means someone else
   * deleted or replaced a table. */
  #handles = new Map<NftFamily, number>();

  constructor(options: NftablesDataplaneOptions) {
    this.#nft = options.nft;
    this.#commands = options.commands;
    this.#log = options.log ?? (() => {});
  }

  async start(): Promise<void> {
    const ip = adoptTable('ip', await this.#nft.listTableJson('ip'));
    const ip6 = adoptTable('ip6', await this.#nft.listTableJson('ip6'));
    if (!ip && !ip6) {
      this.#log('nftables: no table from an earlier run');
      return;
    }
    const desired: DesiredRuleset = { ...(ip && { ip }), ...(ip6 && { ip6 }) };
    this.#record = { desired, indexes: new Map(), objectCount: objectCount(desired) };
    this.#handles = await this.#tableHandles();
    this.#log('nftables: adopted the tables of an earlier run', { objects: this.#record.objectCount });
  }

  async sync(state: DualStackState, kind: SyncKind): Promise<SyncOutcome> {
    const record = this.#record;
    let ran: SyncKind | undefined;
    try {
      ran = record && (await this.#syncAgainstRecord(record, state, kind));
    } catch (error) {
      this.#log('nftables: incremental sync failed, falling back to full', { error: String(error) });
    }
    if (ran === undefined) {
      await this.#syncFull(state);
      ran = 'full';
    }
    const conntrackEntriesDeleted = await this.#cleanStaleUdpFlows(record?.state, state);
    return { kind: ran, objectCount: this.#record?.objectCount ?? 0, conntrackEntriesDeleted };
  }

  async intact(): Promise<boolean> {
    if (!this.#record) return false;
    const handles = await this.#tableHandles();
    for (const family of FAMILIES) {
      if (handles.get(family) !== this.#handles.get(family)) return false;
    }
    return true;
  }

  async cleanup(): Promise<void> {
    // `add` first makes the delete succeed whether or not the table exists.
    await this.#nft.run(
      FAMILIES.map((f) => `add table ${f} ${TABLE}\ndelete table ${f} ${TABLE}\n`).join(''),
    );
    this.#record = undefined;
    this.#handles = new Map();
  }

  /** A sync planned from the record, or undefined when only a full sync will do. */
  async #syncAgainstRecord(
    record: CommittedRecord,
    state: DualStackState,
    kind: SyncKind,
  ): Promise<SyncKind | undefined> {
    // Right after adoption even a full sync is a diff: same result, no table replaced under traffic.
    const adopted = FAMILIES.some((f) => record.desired?.[f]?.adopted);
    if (kind === 'incremental' && !adopted && (await this.#syncFragments(record, state)))
      return 'incremental';
    if (kind === 'full' && !adopted) return undefined;
    const prev = record.desired ?? (record.state && desiredRuleset(record.state));
    if (!prev) return undefined;
    await this.#syncDiff(prev, state);
    return adopted ? 'full' : 'incremental';
  }

  async #syncFull(state: DualStackState): Promise<void> {
    this.#record = undefined;
    const desired = desiredRuleset(state);
    await this.#nft.run(fullTransaction(desired).toString());
    this.#handles = await this.#tableHandles();
    this.#record = { desired, state, indexes: new Map(), objectCount: objectCount(desired) };
  }

  async #syncDiff(prev: DesiredRuleset, state: DualStackState): Promise<void> {
    const desired = desiredRuleset(state);
    const script = diffRulesets(prev, desired).toString();
    if (script !== '') await this.#nft.run(script);
    // A family that appears or goes away has its table created or deleted.
    if (FAMILIES.some((f) => Boolean(prev[f]) !== Boolean(desired[f])))
      this.#handles = await this.#tableHandles();
    this.#record = { desired, state, indexes: new Map(), objectCount: objectCount(desired) };
  }

  /** The fragment path; false when it does not apply (then nothing was changed). */
  async #syncFragments(record: CommittedRecord, state: DualStackState): Promise<boolean> {
    if (!record.state) return false;
    const tx = new NftTransaction();
    const commits: (() => void)[] = [];
    let delta = 0;
    for (const family of FAMILIES) {
      const prev = record.state[MODEL_FAMILY[family]];
      const next = state[MODEL_FAMILY[family]];
      if (!prev && !next) continue;
      if (!prev || !next || !isDeepStrictEqual(prev.node, next.node)) return false;
      const changed = changedServicePorts(prev, next);
      if (changed.size === 0) continue;
      let index = record.indexes.get(family);
      if (index === undefined) {
        index = FragmentIndex.build(family, prev) ?? 'collisions';
        record.indexes.set(family, index);
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

  async #tableHandles(): Promise<Map<NftFamily, number>> {
    const listing = (await this.#nft.listTablesJson()) as {
      nftables?: Record<string, Record<string, unknown>>[];
    };
    const handles = new Map<NftFamily, number>();
    for (const object of listing.nftables ?? []) {
      const table = object.table;
      if (table?.name === TABLE && (table.family === 'ip' || table.family === 'ip6')) {
        handles.set(table.family, Number(table.handle));
      }
    }
    return handles;
  }

  async #cleanStaleUdpFlows(prev: DualStackState | undefined, next: DualStackState): Promise<number> {
    let deleted = 0;
    for (const family of FAMILIES) {
      const state = next[MODEL_FAMILY[family]];
      if (!state) continue;
      const deletions = staleUdpFlowDeletions(prev?.[MODEL_FAMILY[family]], state);
      if (deletions.length > 0) deleted += await deleteStaleUdpFlows(this.#commands, deletions);
    }
    return deleted;
  }
}
