// The live nftables dataplane: the only nftables code that touches the kernel.
//
// It keeps a record of what it committed (the desired ruleset and the state it came from) and
// plans incremental syncs against that record, never against the kernel. It reads the kernel
// only at start (adoption), for the cheap intact() check (table handles), and in cleanup.
// Any failed incremental transaction falls back to a full one; a failed full transaction leaves
// the previous ruleset in place (nft transactions are atomic) and forgets the record, so the
// sync loop's retry is full again.
import type { DualStackState, IPFamily } from '../../src/model/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../shared/dataplane.ts';
import { deleteStaleUdpFlows, staleUdpFlowDeletions } from '../shared/udp-conntrack-cleanup.ts';
import { adoptTable } from './adopt.ts';
import { desiredRuleset } from './desired-ruleset.ts';
import { diffRulesets } from './diff.ts';
import { fullTransaction } from './full-transaction.ts';
import type { NftRunner } from './nft-runner.ts';
import { type DesiredRuleset, FAMILIES } from './ruleset.ts';
import { type NftFamily, TABLE } from './transaction.ts';

export type NftablesLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

export interface NftablesDataplaneOptions {
  readonly nft: NftRunner;
  /** Runs `conntrack` for the stale UDP flow cleanup. */
  readonly commands: CommandRunner;
  readonly log?: NftablesLog;
}

interface CommittedRecord {
  readonly desired: DesiredRuleset;
  /** Absent after adoption: what the earlier run synced is unknown. */
  readonly state?: DualStackState;
}

const MODEL_FAMILY: Readonly<Record<NftFamily, IPFamily>> = { ip: 'IPv4', ip6: 'IPv6' };

/** Rules plus elements: what the rule-count metrics report. */
export function objectCount(desired: DesiredRuleset): number {
  let count = 0;
  for (const family of FAMILIES) {
    const ruleset = desired[family];
    if (!ruleset) continue;
    for (const chain of ruleset.chains.values()) count += chain.rules.length;
    for (const elements of ruleset.elements.values()) count += elements.size;
  }
  return count;
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
    const desired: { ip?: ReturnType<typeof adoptTable>; ip6?: ReturnType<typeof adoptTable> } = {};
    for (const family of FAMILIES)
      desired[family] = adoptTable(family, await this.#nft.listTableJson(family));
    if (!desired.ip && !desired.ip6) {
      this.#log('nftables: no table from an earlier run');
      return;
    }
    this.#record = {
      desired: { ...(desired.ip && { ip: desired.ip }), ...(desired.ip6 && { ip6: desired.ip6 }) },
    };
    this.#handles = await this.#tableHandles();
    this.#log('nftables: adopted the tables of an earlier run', {
      objects: objectCount(this.#record.desired),
    });
  }

  async sync(state: DualStackState, kind: SyncKind): Promise<SyncOutcome> {
    const next = desiredRuleset(state);
    const record = this.#record;
    // Right after adoption even a full sync is a diff: same result, no table replaced under traffic.
    const adopted = record !== undefined && FAMILIES.some((f) => record.desired[f]?.adopted);
    let ran: SyncKind = 'full';
    if (record && (kind === 'incremental' || adopted)) {
      const script = diffRulesets(record.desired, next).toString();
      try {
        if (script !== '') await this.#nft.run(script);
        ran = adopted ? 'full' : 'incremental';
      } catch (error) {
        this.#log('nftables: incremental sync failed, falling back to full', { error: String(error) });
        await this.#full(next);
      }
    } else {
      await this.#full(next);
    }
    // An incremental sync creates or deletes the table of a family that appears or goes away.
    if (ran === 'incremental' && FAMILIES.some((f) => Boolean(record?.desired[f]) !== Boolean(next[f]))) {
      this.#handles = await this.#tableHandles();
    }
    this.#record = { desired: next, state };
    const conntrackEntriesDeleted = await this.#cleanStaleUdpFlows(record?.state, state);
    return { kind: ran, objectCount: objectCount(next), conntrackEntriesDeleted };
  }

  async intact(): Promise<boolean> {
    if (!this.#record) return false;
    const handles = await this.#tableHandles();
    for (const family of FAMILIES) {
      if (Boolean(this.#record.desired[family]) !== handles.has(family)) return false;
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

  async #full(next: DesiredRuleset): Promise<void> {
    this.#record = undefined;
    await this.#nft.run(fullTransaction(next).toString());
    this.#handles = await this.#tableHandles();
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
