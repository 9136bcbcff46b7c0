// What each sync of the daemon does, once the sync loop (sync-loop.ts) has said when and which
// kind: take the model's update, report its problems and counts, bring the dataplane to the new
// state, and make the health-check node port listeners follow it.
//
// An incremental change over the round budget is applied in rounds (sync-rounds.ts): cheapest
// service ports first, each round a consistent state. Between rounds the model's next update is
// taken, and what it changed joins the ports still to apply, split again: a small Service's change
// that arrives while a huge one is being programmed goes in the next round, not after it. Counts
// and health-check listeners follow each round's state, the state the dataplane holds. A full
// sync (the loop's, or the model's after a node change) is one plan.
//
// A failure propagates unchanged: the loop reports it (sync-log.ts tells a kernel refusal from a
// bug, metrics.ts counts both) and retries in full.
import { setImmediate } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Problem } from '../../contract/base/problem.ts';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../../contract/dataplane.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import type { ModelUpdate } from '../model/model-cache.ts';
import type { ProxyMetrics } from './metrics.ts';
import { StateCounter } from './state-counts.ts';
import type { Syncer } from './sync-loop.ts';
import { ROUND_BUDGET, stateAfterRound, syncRounds } from './sync-rounds.ts';

/** The health-check node port listeners (src/daemon/health-check-node-ports.ts). */
export interface HealthCheckListeners {
  /** Listen on the ports `state` asks for, and no other; `failed` ports are not listened on. */
  update(state: DualStackState): Promise<{
    readonly failed: readonly { readonly port: number; readonly error: unknown }[];
  }>;
}

export interface SyncStepOptions {
  /** The daemon's ModelCache, fed by the informers. */
  readonly model: { updateInSlices(): Promise<ModelUpdate> };
  readonly dataplane: Pick<LiveDataplane, 'sync' | 'intact'>;
  readonly healthChecks: HealthCheckListeners;
  readonly metrics: Pick<ProxyMetrics, 'problemsCounted' | 'noLocalEndpointsCounted'>;
  readonly logger: Logger;
  /** Endpoints one round of an incremental sync may change (sync-rounds.ts; tests: smaller). */
  readonly roundBudget?: number;
}

/** What the last sync's state holds, for its log line. */
export interface StateSummary {
  readonly servicePorts: number;
  readonly endpoints: number;
}

export class SyncStep implements Syncer {
  readonly #options: SyncStepOptions;
  readonly #counter = new StateCounter();
  /** The state the dataplane was last asked for (and the counts describe). */
  #applied: DualStackState = {};
  /**
   * Changed service ports of the model's last update that no round applied yet: a sync that failed
   * between rounds leaves them for the next (full) one's counts.
   */
  #owed = new Set<ServicePortKey>();
  /** The listeners have not followed a change yet (or failed to): every sync tries again. */
  #healthChecksOwed = false;
  #summary: StateSummary = { servicePorts: 0, endpoints: 0 };
  #reportedProblems: ReadonlySet<string> = new Set();

  constructor(options: SyncStepOptions) {
    this.#options = options;
  }

  get summary(): StateSummary {
    return this.#summary;
  }

  /** The state the dataplane was last asked for (what an integrity check compares the kernel with). */
  get applied(): DualStackState {
    return this.#applied;
  }

  async sync(kind: SyncKind): Promise<SyncOutcome> {
    const update = await this.#update();
    // After a failed sync the loop asks for a full one, so an incremental sync always starts from
    // the state of the last sync that ran.
    if (kind === 'full' || update.full) {
      const changed = update.full ? undefined : this.#pendingWith(update.changed);
      this.#owed = new Set();
      return this.#apply(update.state, kind, changed);
    }
    const budget = this.#options.roundBudget ?? ROUND_BUDGET;
    let target = update.state;
    const pending = this.#pendingWith(update.changed);
    let rounds = syncRounds(this.#applied, target, pending, budget);
    if (rounds.length > 1) {
      this.#options.logger.info(
        { servicePorts: pending.size, rounds: rounds.length, budget },
        'change over the round budget: applied in rounds, cheapest service ports first',
      );
    }
    const outcomes: SyncOutcome[] = [];
    for (let i = 0; ; i++) {
      const keys = rounds[i]!;
      const last = i === rounds.length - 1;
      const state = last ? target : stateAfterRound(this.#applied, target, keys);
      for (const key of keys) pending.delete(key);
      this.#owed = pending;
      outcomes.push(await this.#apply(state, 'incremental', new Set(keys)));
      if (last) return merged(outcomes);
      const next = await this.#update();
      if (next.full) {
        this.#owed = new Set();
        outcomes.push(await this.#apply(next.state, 'full', undefined));
        return merged(outcomes);
      }
      if (next.changed.size > 0) {
        // Newer changes join what is left, and everything left is split again: small first.
        target = next.state;
        for (const key of next.changed) pending.add(key);
        rounds = syncRounds(this.#applied, target, pending, budget);
        i = -1;
      }
    }
  }

  /** The model's next update, its problems reported. */
  async #update(): Promise<ModelUpdate> {
    const { model, metrics, logger } = this.#options;
    const update = await model.updateInSlices();
    this.#reportedProblems = logNewProblems(logger, update.problems, this.#reportedProblems);
    metrics.problemsCounted(update.problems.length);
    return update;
  }

  #pendingWith(changed: ReadonlySet<ServicePortKey>): Set<ServicePortKey> {
    const pending = new Set(this.#owed);
    for (const key of changed) pending.add(key);
    return pending;
  }

  /**
   * One dataplane sync to `state`; `changed`: the ports that differ from the state applied before
   * (undefined: any may).
   */
  async #apply(
    state: DualStackState,
    kind: SyncKind,
    changed: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<SyncOutcome> {
    const { dataplane, healthChecks, metrics, logger } = this.#options;
    const previous = this.#applied;
    this.#applied = state;
    // A full sync's counts walk every port, as do the model's sort before and the plan after:
    // a turn of the event loop between them keeps each turn short (tens of ms each at 30k).
    if (changed === undefined) await setImmediate();
    const counts = this.#counter.update(state, changed);
    this.#summary = { servicePorts: counts.servicePorts, endpoints: counts.endpoints };
    metrics.noLocalEndpointsCounted(counts.noLocal);
    if (changed === undefined) await setImmediate();
    // The listeners follow the health-check node ports and local endpoint counts, which only
    // changed service ports can move. Owed until an update succeeds (this sync may fail before it).
    this.#healthChecksOwed ||= changed === undefined || touchesHealthChecks(previous, state, changed);
    const outcome = await dataplane.sync(state, kind, kind === 'incremental' ? changed : undefined);
    if (this.#healthChecksOwed) {
      const { failed } = await healthChecks.update(state);
      this.#healthChecksOwed = failed.length > 0;
      for (const { port, error } of failed) {
        logger.warn({ port, err: error }, 'cannot open health check node port; retrying on the next sync');
      }
    }
    return outcome;
  }

  intact(): Promise<boolean> {
    return this.#options.dataplane.intact();
  }
}

/** The rounds of one sync as one outcome: full when any round fell back to full. */
function merged(outcomes: readonly SyncOutcome[]): SyncOutcome {
  const last = outcomes[outcomes.length - 1]!;
  if (outcomes.length === 1) return last;
  return {
    kind: outcomes.some((outcome) => outcome.kind === 'full') ? 'full' : 'incremental',
    objectCount: last.objectCount,
    conntrack: outcomes.flatMap((outcome) => outcome.conntrack),
  };
}

/** Whether a changed service port has, or had, a health-check node port. */
function touchesHealthChecks(
  prev: DualStackState,
  next: DualStackState,
  changed: ReadonlySet<ServicePortKey>,
): boolean {
  for (const key of changed) {
    for (const family of ['IPv4', 'IPv6'] as const) {
      if (prev[family]?.servicePorts.get(key)?.healthCheckNodePort) return true;
      if (next[family]?.servicePorts.get(key)?.healthCheckNodePort) return true;
    }
  }
  return false;
}

/** Each problem once while it persists, so a bad object does not flood the log every sync. */
function logNewProblems(
  logger: Logger,
  problems: readonly Problem[],
  seen: ReadonlySet<string>,
): ReadonlySet<string> {
  const now = new Set<string>();
  for (const problem of problems) {
    const key = `${problem.object}: ${problem.reason}`;
    now.add(key);
    if (!seen.has(key)) logger.warn({ object: problem.object }, `skipped: ${problem.reason}`);
  }
  return now;
}
