// What each sync of the daemon does, once the sync loop (sync-loop.ts) has said when and which
// kind: take the model's update, report its problems and counts, bring the dataplane to the new
// state, and make the health-check node port listeners follow it.
//
// A failure propagates unchanged: the loop reports it (sync-log.ts tells a kernel refusal from a
// bug, metrics.ts counts both) and retries in full.
import type { Logger } from 'pino';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../../dataplanes/shared/dataplane.ts';
import type { Problem } from '../base/problem.ts';
import type { ModelUpdate } from '../model/model-cache.ts';
import type { DualStackState, ServicePortKey } from '../model/proxy-state.ts';
import type { ProxyMetrics } from './metrics.ts';
import { StateCounter } from './state-counts.ts';
import type { Syncer } from './sync-loop.ts';

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
}

/** What the last sync's state holds, for its log line. */
export interface StateSummary {
  readonly servicePorts: number;
  readonly endpoints: number;
}

export class SyncStep implements Syncer {
  readonly #options: SyncStepOptions;
  readonly #counter = new StateCounter();
  #lastState: DualStackState = {};
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

  async sync(kind: SyncKind): Promise<SyncOutcome> {
    const { model, dataplane, healthChecks, metrics, logger } = this.#options;
    const { state, changed, full, problems } = await model.updateInSlices();
    this.#reportedProblems = logNewProblems(logger, problems, this.#reportedProblems);
    metrics.problemsCounted(problems.length);
    const previous = this.#lastState;
    this.#lastState = state;
    const counts = this.#counter.update(state, full ? undefined : changed);
    this.#summary = { servicePorts: counts.servicePorts, endpoints: counts.endpoints };
    metrics.noLocalEndpointsCounted(counts.noLocal);
    // The listeners follow the health-check node ports and local endpoint counts, which only
    // changed service ports can move. Owed until an update succeeds (this sync may fail before it).
    this.#healthChecksOwed ||= full || touchesHealthChecks(previous, state, changed);
    // After a failed sync the loop asks for a full one, so `changed` is always relative to the
    // state of the last sync that ran.
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
