// The live iptables dataplane: the only iptables code that touches the kernel.
//
// It keeps a record of what it committed (the state, the nat chains it owns, rule counts) and
// never reads the kernel on the hot path: an incremental sync is planned from the record. It reads
// the kernel once at start (to find chains an earlier run left), for the cheap canary check, and
// in cleanup. Anything unexpected — a missing canary, a failed restore — leads to a full sync.

import type { IPFamily } from '../../contract/base/ip-family.ts';
import { runInSlices } from '../../contract/base/work-slices.ts';
import type {
  CleanupCommand,
  DataplaneLog,
  IptablesRuleCount,
  LiveDataplane,
  SyncKind,
  SyncOutcome,
} from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import { removedObjects, runRemoval } from '../shared/cleanup-commands.ts';
import { type CommandRunner, IPTABLES_WAIT } from '../shared/command-runner.ts';
import { UdpConntrackReconciler } from '../shared/conntrack/udp-conntrack-reconciler.ts';
import { existingIptablesTables } from '../shared/existing-iptables-tables.ts';
import { firstChainLine, savedChainNames } from '../shared/iptables-save.ts';
import { chooseBackend, type IptablesBackend, type IptablesTools, iptablesTools } from './backend.ts';
import { CANARY_CHAIN, isKproxyChain } from './chain-names.ts';
import { cleanupInputs } from './cleanup-plan.ts';
import { DumpPacer, savedTableDamage } from './intact-check.ts';
import { jumpListed } from './jump-rules.ts';
import type { FamilyPlan, IptablesPlan, IptablesTable, JumpRule } from './plan-types.ts';
import { fullPlanSteps, incrementalPlanSteps } from './planner.ts';
import { NFT_CHAINS_PER_RESTORE, restorePartsOf } from './restore-chunks.ts';
import { FAMILIES, RuleCounts, restoreInputSteps } from './restore-plan.ts';

export type IptablesLog = DataplaneLog;

export interface IptablesDataplaneOptions {
  readonly runner: CommandRunner;
  /** Use this backend; otherwise start() chooses like kube-proxy (and logs why). */
  readonly backend?: IptablesBackend;
  readonly log?: IptablesLog;
  /** iptables-nft only: most service chains one restore declares (restore-chunks.ts). */
  readonly nftChainsPerRestore?: number;
  /** Share of the time intact() may spend reading tables back (intact-check.ts; tests: 1, always). */
  readonly dumpShare?: number;
}

/** An iptables tool failed; `stderr` says why. */
export class IptablesCommandError extends DataplaneError {
  readonly stderr: string;
  constructor(command: string, stderr: string) {
    super(`${command} failed: ${stderr.trim()}`);
    this.name = 'IptablesCommandError';
    this.stderr = stderr;
  }
}

const TABLES: readonly IptablesTable[] = ['filter', 'nat', 'mangle'];
const RESTORE_FLAGS = ['--noflush', ...IPTABLES_WAIT];

export class IptablesDataplane implements LiveDataplane {
  readonly mode = 'iptables';
  readonly #runner: CommandRunner;
  readonly #log: IptablesLog;
  readonly #nftChainsPerRestore: number;
  #backend: IptablesBackend | undefined;
  /** The state the kernel holds, when we are sure of it; undefined forces the next sync to be full. */
  #committed: DualStackState | undefined;
  readonly #conntrack: UdpConntrackReconciler;
  /** Per family, the nat chains we own (so a full sync can delete the stale ones). */
  readonly #natChains = new Map<IPFamily, Set<string>>();
  /** Per family, rules per "table/chain" (the rule-count metrics, the tables read back). */
  readonly #ruleCounts = new Map<IPFamily, RuleCounts>();
  readonly #dumps: DumpPacer;
  /** Tables being read back, started by intact() (intact-check.ts); settled() waits for them. */
  #reading: Promise<void> | undefined;
  /** What a finished read found changed since the last full sync; the next intact() reports it. */
  #tampered: string | undefined;
  /** Counts syncs and cleanups: a read that saw the tables of another one than it compares is dropped. */
  #generation = 0;

  constructor(options: IptablesDataplaneOptions) {
    this.#runner = options.runner;
    this.#backend = options.backend;
    this.#log = options.log ?? (() => {});
    this.#conntrack = new UdpConntrackReconciler(options.runner, this.#log);
    this.#nftChainsPerRestore = options.nftChainsPerRestore ?? NFT_CHAINS_PER_RESTORE;
    this.#dumps = new DumpPacer(options.dumpShare);
  }

  get backend(): IptablesBackend | undefined {
    return this.#backend;
  }

  async start(): Promise<void> {
    await this.#ensureBackend();
    for (const family of FAMILIES) {
      this.#natChains.set(family, new Set((await this.#existingChains(family, 'nat')).filter(isKproxyChain)));
    }
  }

  async sync(
    state: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    await this.#ensureBackend();
    this.#generation++;
    let ran: SyncKind = 'full';
    if (kind === 'incremental' && this.#committed !== undefined) {
      ran = (await this.#tryIncremental(this.#committed, state)) ? 'incremental' : 'full';
    }
    if (ran === 'full') {
      await this.#syncFull(state);
      this.#tampered = undefined;
    }
    this.#committed = state;
    return {
      kind: ran,
      objectCount: this.#objectCount(),
      iptablesRules: this.#rulesByTable(),
      conntrack: await this.#conntrack.afterSync(state, ran, changed),
    };
  }

  /**
   * The canary in every table of every family we program, and what the last read of the tables
   * found (intact-check.ts: every chain at the rule count committed, every jump in place). A read
   * takes seconds at 10k services, so it runs beside the sync loop, started here when a table's
   * turn comes, and the next call reports it. Any difference means someone changed our rules: the
   * record no longer describes the kernel, so the next sync is full.
   */
  async intact(): Promise<boolean> {
    const ok = this.#tampered === undefined && (await this.#canariesPresent(TABLES));
    if (!ok) {
      this.#committed = undefined;
      return false;
    }
    this.#reading ??= this.#readTables().finally(() => {
      this.#reading = undefined;
    });
    return true;
  }

  /** Resolves once a read of the tables that intact() started has been compared. */
  async settled(): Promise<void> {
    await this.#reading;
  }

  /** The tables whose turn it is (DumpPacer), read back and compared with the record. */
  async #readTables(): Promise<void> {
    const generation = this.#generation;
    for (const family of FAMILIES) {
      const counts = this.#ruleCounts.get(family);
      if (this.#committed?.[family] === undefined || counts === undefined) continue;
      for (const table of TABLES) {
        const key = `${family}/${table}`;
        if (!this.#dumps.due(key)) continue;
        // A read that fails (a timeout) is tried again at its next turn.
        const saved = await this.#dumps.timed(key, () => this.#save(family, table)).catch(() => undefined);
        if (saved === undefined) return;
        const damage = await runInSlices(savedTableDamage(table, saved, counts.byChain));
        // A sync since the read began: the tables may be another record's.
        if (generation !== this.#generation) return;
        if (damage === undefined) continue;
        this.#log('iptables rules changed by someone else; full sync', { family, damage });
        this.#tampered = damage;
        this.#committed = undefined;
        return;
      }
    }
  }

  /**
   * Removes every KPROXY chain and every rule that jumps to one, in both families and both
   * backends (a run with the other backend may have left some), and nothing else: only tables
   * a backend already holds are read (existing-iptables-tables.ts), so none is created.
   */
  async cleanup(): Promise<readonly string[]> {
    const commands = await this.cleanupCommands();
    for (const command of commands) await runRemoval(this.#runner, command);
    const removed = removedObjects(commands);
    for (const family of FAMILIES) {
      this.#natChains.set(family, new Set());
      this.#ruleCounts.delete(family);
    }
    this.#generation++;
    this.#tampered = undefined;
    this.#committed = undefined;
    return removed;
  }

  /** The restore inputs of cleanup(), each for a table its backend holds (checked again by a purge). */
  async cleanupCommands(): Promise<readonly CleanupCommand[]> {
    const commands: CleanupCommand[] = [];
    for (const backend of ['nft', 'legacy'] as const) {
      const maxChains = backend === 'nft' ? this.#nftChainsPerRestore : Number.POSITIVE_INFINITY;
      for (const family of FAMILIES) {
        const tools = iptablesTools(backend, family);
        const tables = await existingIptablesTables(this.#runner, tools.save);
        for (const table of TABLES) {
          const saved = tables.get(table) ?? '';
          const chains = savedChainNames(saved).filter(isKproxyChain).length;
          const what = `${tools.iptables} ${table}: ${chains} kproxy chain(s)`;
          for (const input of cleanupInputs(table, saved, maxChains)) {
            // A restore naming a table creates it when it is not there (legacy: modprobe and all),
            // and a chain it flushes when that is gone.
            const when = [`*${table}`, firstChainLine(input)].flatMap((printsLine) =>
              printsLine === undefined ? [] : [{ command: tools.save, args: [], printsLine }],
            );
            commands.push({ what, command: tools.restore, args: RESTORE_FLAGS, input, when });
          }
        }
      }
    }
    return commands;
  }

  async #tryIncremental(committed: DualStackState, state: DualStackState): Promise<boolean> {
    // A family that comes or goes is a full sync: it installs or removes the jump rules too.
    if (FAMILIES.some((family) => (committed[family] === undefined) !== (state[family] === undefined)))
      return false;
    try {
      // Only the small mangle table on the hot path (iptables-nft reads a whole table to list one
      // chain); intact(), which the sync loop calls periodically, checks nat and filter as well.
      if (!(await this.#canariesPresent(['mangle']))) {
        this.#log('iptables canary missing: someone flushed our rules; full sync');
        return false;
      }
      await this.#apply(await runInSlices(incrementalPlanSteps(committed, state)));
      return true;
    } catch (error) {
      // Anything but a refused command is a bug: the sync fails (the daemon reports it), and the
      // loop's retry is full.
      if (!(error instanceof DataplaneError)) throw error;
      this.#log('iptables incremental sync failed; full sync', { error: String(error) });
      return false;
    }
  }

  async #canariesPresent(tables: readonly IptablesTable[]): Promise<boolean> {
    const committed = this.#committed;
    if (committed === undefined || this.#backend === undefined) return false;
    const checks = FAMILIES.filter((family) => committed[family] !== undefined).flatMap((family) =>
      tables.map(async (table) => {
        const result = await this.#iptables(family, ['-t', table, '-S', CANARY_CHAIN]);
        return result.exitCode === 0 && result.stdout.includes(`-A ${CANARY_CHAIN} `);
      }),
    );
    return (await Promise.all(checks)).every(Boolean);
  }

  async #syncFull(state: DualStackState): Promise<void> {
    this.#committed = undefined;
    const plan = await runInSlices(fullPlanSteps(state));
    const forThisKernel = async (familyPlan: FamilyPlan | undefined) =>
      familyPlan && this.#onlyMissingJumps(this.#deletingStaleChains(familyPlan));
    const withStale: IptablesPlan = {
      kind: 'full',
      IPv4: await forThisKernel(plan.IPv4),
      IPv6: await forThisKernel(plan.IPv6),
    };
    for (const family of FAMILIES) this.#ruleCounts.set(family, new RuleCounts());
    await this.#apply(withStale);
    for (const family of FAMILIES) {
      if (state[family] === undefined && this.#natChains.get(family)?.size) {
        // The family went away: nothing of it may stay behind.
        for (const table of TABLES) await this.#cleanupTable(family, table);
        this.#natChains.set(family, new Set());
      }
    }
  }

  /** A full plan plus the deletion of the nat chains we own that the plan no longer has. */
  #deletingStaleChains(plan: FamilyPlan): FamilyPlan {
    const owned = this.#natChains.get(plan.family) ?? new Set<string>();
    return {
      family: plan.family,
      tables: plan.tables.map((t) =>
        t.table === 'nat' ? { ...t, deleted: [...owned].filter((chain) => !t.chains.has(chain)).sort() } : t,
      ),
    };
  }

  /**
   * The plan with only the jumps from built-in chains that are not there yet (jump-rules.ts): its
   * restore inserts them, and a jump already in place is never inserted twice. One listing per
   * built-in chain, and `iptables -C` only for a jump the listing leaves open (or a chain that
   * could not be listed): 6 processes a family rather than 14.
   */
  async #onlyMissingJumps(plan: FamilyPlan): Promise<FamilyPlan> {
    const listings = new Map<string, readonly string[] | undefined>();
    const tables = [];
    for (const t of plan.tables) {
      const missing: JumpRule[] = [];
      for (const jump of t.jumps) {
        const chain = `${jump.table} ${jump.from}`;
        if (!listings.has(chain)) {
          const listed = await this.#iptables(plan.family, ['-t', jump.table, '-S', jump.from]);
          listings.set(chain, listed.exitCode === 0 ? listed.stdout.split('\n') : undefined);
        }
        const listing = listings.get(chain);
        const there =
          (listing && jumpListed(plan.family, jump, listing)) ??
          (await this.#iptables(plan.family, ['-t', jump.table, '-C', jump.from, ...jump.spec])).exitCode ===
            0;
        if (!there) missing.push(jump);
      }
      tables.push({ ...t, jumps: missing });
    }
    return { family: plan.family, tables };
  }

  async #apply(plan: IptablesPlan): Promise<void> {
    for (const family of FAMILIES) {
      const familyPlan = plan[family];
      if (familyPlan === undefined) continue;
      const parts =
        this.#backend === 'nft' ? restorePartsOf(familyPlan, this.#nftChainsPerRestore) : [familyPlan];
      for (const part of parts) {
        const input = await runInSlices(restoreInputSteps(part));
        if (input.length === 0) continue;
        const tool = this.#tools(family).restore;
        const result = await this.#runner.run(tool, RESTORE_FLAGS, input);
        if (result.exitCode !== 0) throw new IptablesCommandError(tool, result.stderr);
        this.#record(part);
      }
    }
  }

  #record(plan: FamilyPlan): void {
    const owned = this.#natChains.get(plan.family) ?? new Set<string>();
    for (const t of plan.tables.filter((t) => t.table === 'nat')) {
      for (const chain of t.chains.keys()) owned.add(chain);
      for (const chain of t.deleted) owned.delete(chain);
    }
    this.#natChains.set(plan.family, owned);
    const counts = this.#ruleCounts.get(plan.family) ?? new RuleCounts();
    counts.apply(plan);
    this.#ruleCounts.set(plan.family, counts);
  }

  async #cleanupTable(family: IPFamily, table: IptablesTable): Promise<void> {
    const maxChains = this.#backend === 'nft' ? this.#nftChainsPerRestore : Number.POSITIVE_INFINITY;
    const tool = this.#tools(family).restore;
    for (const input of cleanupInputs(table, await this.#save(family, table), maxChains)) {
      await this.#restore(tool, input);
    }
  }

  async #restore(tool: string, input: string): Promise<void> {
    const result = await this.#runner.run(tool, RESTORE_FLAGS, input);
    if (result.exitCode !== 0) throw new IptablesCommandError(tool, result.stderr);
  }

  async #existingChains(family: IPFamily, table: IptablesTable): Promise<string[]> {
    return savedChainNames(await this.#save(family, table));
  }

  async #save(family: IPFamily, table: IptablesTable): Promise<string> {
    const tool = this.#tools(family).save;
    const result = await this.#runner.run(tool, ['-t', table]);
    // A table that was never used has nothing of ours; some versions fail to list it at all.
    return result.exitCode === 0 ? result.stdout : '';
  }

  /** Exit 1 answers a check (-C, -S: not there); exit 4 is no answer and throws (see below). */
  async #iptables(family: IPFamily, args: readonly string[]) {
    const tool = this.#tools(family).iptables;
    const result = await this.#runner.run(tool, [...IPTABLES_WAIT, ...args]);
    // A resource problem: the xtables lock still held after the wait, or no usable table. Taken
    // for "rule missing", each of a sync's checks would wait again before the sync failed.
    if (result.exitCode === 4) throw new IptablesCommandError(tool, result.stderr);
    return result;
  }

  #tools(family: IPFamily): IptablesTools {
    if (this.#backend === undefined) throw new Error('iptables backend used before it was chosen');
    return iptablesTools(this.#backend, family);
  }

  async #ensureBackend(): Promise<void> {
    if (this.#backend !== undefined) return;
    const choice = await chooseBackend(this.#runner);
    this.#backend = choice.backend;
    this.#log(`iptables backend: ${choice.backend}`, { reason: choice.reason });
  }

  #rulesByTable(): IptablesRuleCount[] {
    return [...this.#ruleCounts].flatMap(([family, counts]) =>
      TABLES.map((table) => ({ family, table, rules: counts.total(table) })),
    );
  }

  #objectCount(): number {
    let total = 0;
    for (const counts of this.#ruleCounts.values()) for (const table of TABLES) total += counts.total(table);
    return total;
  }
}
