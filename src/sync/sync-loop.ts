// When to sync: kube-proxy's BoundedFrequencyRunner semantics, made explicit.
//
// - Changes are coalesced: a sync starts no earlier than minSyncPeriod after the previous one
//   started, and every change that arrives meanwhile is folded into it. A sync that is allowed
//   right away still goes through a zero-delay timer, so a burst delivered in one tick is one sync.
// - Syncs never overlap; a change during a sync schedules the next one (a sync applied in rounds,
//   sync-step.ts, also takes it into its next round, and the next sync finds nothing left).
// - Every syncPeriod without a sync, a periodic check runs: if the dataplane reports its rules are
//   not intact (someone flushed them), a full sync repairs them. Until it has, the damage counts as
//   a queued change (health sees it like any other pending one).
// - At least every fullSyncPeriod a sync is full whatever the check says (kube-proxy's hourly
//   FullSyncPeriod): it repairs damage too subtle for the cheap check.
// - The first sync waits for start() (the daemon calls it once the informers have synced) and is
//   full; so is the sync after a failure, retried with capped exponential backoff. Otherwise
//   syncs are incremental unless a full one was asked for (node label changes).

import type { Clock, Timer } from '../../contract/base/clock.ts';
import type { SyncKind, SyncOutcome } from '../../contract/dataplane.ts';

/** What the loop drives: in the daemon, "build the state and hand it to the live dataplane". */
export interface Syncer {
  sync(kind: SyncKind): Promise<SyncOutcome>;
  intact(): Promise<boolean>;
}

export type SyncReason = 'start' | 'change' | 'full-requested' | 'retry' | 'drift' | 'periodic';

export type SyncLoopEvent =
  /**
   * A sync was asked for (kube-proxy's QueuedUpdate): a change, or start(). Health keeps the
   * first one after the last successful sync, metrics the latest.
   */
  | { readonly type: 'queued'; readonly at: number }
  | {
      readonly type: 'synced';
      readonly requested: SyncKind;
      readonly reason: SyncReason;
      readonly outcome: SyncOutcome;
      readonly startedAt: number;
      readonly durationMs: number;
    }
  | {
      readonly type: 'failed';
      readonly requested: SyncKind;
      readonly reason: SyncReason;
      readonly error: unknown;
      readonly startedAt: number;
      readonly durationMs: number;
      readonly retryInMs: number;
    }
  /** A periodic check found the rules intact and nothing pending. */
  | { readonly type: 'checked'; readonly at: number };

export interface SyncLoopOptions {
  readonly clock: Clock;
  readonly syncer: Syncer;
  readonly minSyncPeriodMs: number;
  readonly syncPeriodMs: number;
  /** A sync is full at least this often after the last full one; 0 or absent: never forced. */
  readonly fullSyncPeriodMs?: number;
  /** First retry delay after a failure; doubles per consecutive failure up to syncPeriod. */
  readonly retryBaseMs?: number;
  readonly onEvent?: (event: SyncLoopEvent) => void;
}

export class SyncLoop {
  readonly #options: SyncLoopOptions;
  readonly #retryBaseMs: number;
  #started = false;
  #stopped = false;
  #running: Promise<void> | undefined;
  #timer: Timer | undefined;
  /** A sync is owed: changes arrived, or a full sync is pending. */
  #dirty = true;
  #fullReason: SyncReason | undefined = 'start';
  /** When the last sync or periodic check started (the anchor for both periods). */
  #lastRunAt = Number.NEGATIVE_INFINITY;
  /** When the last successful full sync started. */
  #lastFullAt = Number.NEGATIVE_INFINITY;
  #failures = 0;
  #retryAt = Number.NEGATIVE_INFINITY;

  constructor(options: SyncLoopOptions) {
    this.#options = options;
    this.#retryBaseMs = options.retryBaseMs ?? Math.max(options.minSyncPeriodMs, 1000);
  }

  /** Something changed. `full` asks for a full sync (e.g. node labels changed). */
  requestSync(request: { readonly full?: boolean } = {}): void {
    if (this.#stopped) return;
    if (request.full && this.#fullReason === undefined) this.#fullReason = 'full-requested';
    this.#dirty = true;
    this.#emit({ type: 'queued', at: this.#options.clock.now() });
    this.#schedule();
  }

  /** The informers have synced: the first (full) sync may run. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#emit({ type: 'queued', at: this.#options.clock.now() });
    this.#schedule();
  }

  /** No more syncs; resolves once a sync in flight has finished. Rules are left as they are. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#running;
  }

  #schedule(): void {
    if (!this.#started || this.#stopped || this.#running) return;
    const { clock, minSyncPeriodMs, syncPeriodMs } = this.#options;
    const due = this.#dirty
      ? Math.max(this.#lastRunAt + minSyncPeriodMs, this.#retryAt)
      : Math.min(this.#lastRunAt + syncPeriodMs, this.#fullDueAt());
    this.#timer?.cancel();
    this.#timer = clock.setTimer(Math.max(0, due - clock.now()), () => {
      this.#timer = undefined;
      this.#running = this.#tick().finally(() => {
        this.#running = undefined;
        this.#schedule();
      });
    });
  }

  /** When the periodic full sync is due (never when disabled). */
  #fullDueAt(): number {
    const period = this.#options.fullSyncPeriodMs ?? 0;
    return period > 0 ? this.#lastFullAt + period : Number.POSITIVE_INFINITY;
  }

  async #tick(): Promise<void> {
    const { clock, syncer } = this.#options;
    this.#lastRunAt = clock.now();
    if (this.#fullReason === undefined && this.#lastRunAt >= this.#fullDueAt()) {
      // Not a queued change (health): nothing is known to be wrong, as in kube-proxy.
      this.#fullReason = 'periodic';
    } else if (!this.#dirty) {
      const intact = await syncer.intact().catch(() => false);
      if (this.#stopped) return;
      if (intact) {
        this.#emit({ type: 'checked', at: this.#lastRunAt });
        return;
      }
      // Damaged rules are a pending change until the repair has synced.
      this.#emit({ type: 'queued', at: this.#lastRunAt });
      this.#fullReason ??= 'drift';
    }
    await this.#sync();
  }

  async #sync(): Promise<void> {
    const { clock, syncer, syncPeriodMs } = this.#options;
    const reason = this.#fullReason ?? 'change';
    const requested: SyncKind = this.#fullReason === undefined ? 'incremental' : 'full';
    // Changes that arrive from here on need another sync.
    this.#dirty = false;
    this.#fullReason = undefined;
    const startedAt = clock.now();
    try {
      const outcome = await syncer.sync(requested);
      if (outcome.kind === 'full') this.#lastFullAt = startedAt;
      this.#failures = 0;
      this.#retryAt = Number.NEGATIVE_INFINITY;
      this.#emit({
        type: 'synced',
        requested,
        reason,
        outcome,
        startedAt,
        durationMs: clock.now() - startedAt,
      });
    } catch (error) {
      this.#failures += 1;
      const retryInMs = Math.min(syncPeriodMs, this.#retryBaseMs * 2 ** (this.#failures - 1));
      const now = clock.now();
      this.#retryAt = now + retryInMs;
      this.#dirty = true;
      this.#fullReason = 'retry';
      this.#emit({
        type: 'failed',
        requested,
        reason,
        error,
        startedAt,
        durationMs: now - startedAt,
        retryInMs,
      });
    }
  }

  #emit(event: SyncLoopEvent): void {
    this.#options.onEvent?.(event);
  }
}
