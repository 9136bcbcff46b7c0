// /healthz and /livez with kube-proxy's semantics (pkg/proxy/healthcheck/proxier_health.go), so
// load balancers and kubelet-style probes that know kube-proxy work unchanged. Three causes make
// them 503:
// - 'unsynced': a change has been queued for the timeout (2 × syncPeriod) or longer without a
//   successful sync (the loop is stuck or keeps failing); kube-proxy's only rule: healthy while
//   now − oldest queued < timeout;
// - 'api-server': the API server has not been followed for the timeout or longer (api-contact.ts
//   says which answers count): the rules stay, but no longer follow the cluster. kproxy's addition;
// - 'node': this node is being deleted or is tainted for scale-down by the cluster autoscaler, so
//   load balancers drain it first: /healthz only, at once; /livez ignores it.
// Each cause is reported once when it starts making them 503 and once when it stops (onReport: the
// daemon logs it), and the metric says which cause holds (health-metrics.ts). The endpoints are
// answered on a thread of their own (health-listener.ts) from what this publishes in `shared` at
// each change, with one more cause that thread judges: the main thread's heartbeat
// (health-heartbeat.ts).
import type { Clock, Timer } from '../../contract/base/clock.ts';
import type { Node } from '../kube/objects.ts';
import type { SyncLoopEvent } from '../sync/sync-loop.ts';
import type { ContactEvent } from './api-contact.ts';
import { SharedHealthState } from './health-shared-state.ts';

/** The taint the cluster autoscaler puts on a node it is about to remove. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

export type HealthCause = 'unsynced' | 'api-server' | 'node';

export const HEALTH_CAUSES: readonly HealthCause[] = ['unsynced', 'api-server', 'node'];

/** A cause that makes the endpoints 503: since when it holds, and what it is, for a person. */
export interface FailingCause {
  readonly cause: HealthCause;
  readonly since: number;
  readonly detail: string;
}

/** A cause starting (failing) or ceasing to make the endpoints 503. */
export interface HealthReport extends FailingCause {
  readonly failing: boolean;
}

export interface HealthStatus {
  readonly healthy: boolean;
  readonly nodeEligible: boolean;
  readonly lastUpdated: number;
  readonly currentTime: number;
}

/** Why this node should stop receiving LB traffic, if it should: being deleted or drained. */
export function nodeLeaving(node: Node | undefined): string | undefined {
  if (!node) return undefined;
  if (node.metadata.deletionTimestamp) return `node ${node.metadata.name} is being deleted`;
  if ((node.spec?.taints ?? []).some((taint) => taint.key === TO_BE_DELETED_TAINT)) {
    return `node ${node.metadata.name} is tainted ${TO_BE_DELETED_TAINT}`;
  }
  return undefined;
}

interface Held {
  readonly since: number;
  readonly detail: string;
  /** Until it makes the endpoints 503 (the timeout after `since`); then reported. */
  timer: Timer | undefined;
}

export class ProxyHealth {
  /** What the health listener's thread answers from: updated at each change below. */
  readonly shared = new SharedHealthState();
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  readonly #onReport: (report: HealthReport) => void;
  readonly #held = new Map<HealthCause, Held>();
  #lastUpdated = 0;

  constructor(clock: Clock, timeoutMs: number, onReport: (report: HealthReport) => void = () => {}) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
    this.#onReport = onReport;
  }

  observe(event: SyncLoopEvent): void {
    switch (event.type) {
      case 'queued':
        // The oldest change counts: later ones do not reset its age.
        if (!this.#held.has('unsynced')) {
          this.#hold('unsynced', event.at, `a queued change has not been synced since ${iso(event.at)}`);
        }
        return;
      case 'synced':
      case 'checked':
        this.#release('unsynced');
        this.#lastUpdated = this.#clock.now();
        this.#publish();
        return;
      case 'failed':
        return;
    }
  }

  nodeChanged(node: Node | undefined): void {
    const leaving = nodeLeaving(node);
    const held = this.#held.get('node');
    if (leaving === held?.detail) return;
    this.#release('node');
    if (leaving !== undefined) this.#hold('node', this.#clock.now(), leaving);
  }

  apiContact(event: ContactEvent): void {
    this.#release('api-server');
    if (event.type === 'lost') {
      const detail = `the API server has not been followed since ${iso(event.at)} (${event.resource}: ${event.error})`;
      this.#hold('api-server', event.at, detail);
    }
  }

  /** The causes that make the endpoints 503 now ('node': /healthz only). */
  failing(): FailingCause[] {
    const now = this.#clock.now();
    return [...this.#held]
      .filter(([cause, held]) => now - held.since >= this.#delay(cause))
      .map(([cause, { since, detail }]) => ({ cause, since, detail }));
  }

  /** Liveness only: syncs keep up with the cluster. */
  live(): HealthStatus {
    const causes = this.failing().map((f) => f.cause);
    return {
      healthy: !causes.includes('unsynced') && !causes.includes('api-server'),
      nodeEligible: !this.#held.has('node'),
      lastUpdated: this.#lastUpdated,
      currentTime: this.#clock.now(),
    };
  }

  /** Readiness for load balancers: live, and this node is not going away. */
  healthz(): HealthStatus {
    const status = this.live();
    return { ...status, healthy: status.healthy && status.nodeEligible };
  }

  /** A node leaving fails /healthz at once; the others after the timeout, as kube-proxy's change. */
  #delay(cause: HealthCause): number {
    return cause === 'node' ? 0 : this.#timeoutMs;
  }

  #hold(cause: HealthCause, since: number, detail: string): void {
    const held: Held = { since, detail, timer: undefined };
    this.#held.set(cause, held);
    const report = () => {
      held.timer = undefined;
      this.#publish();
      this.#onReport({ cause, since, detail, failing: true });
    };
    const wait = since + this.#delay(cause) - this.#clock.now();
    if (wait <= 0) report();
    else held.timer = this.#clock.setTimer(wait, report);
  }

  #release(cause: HealthCause): void {
    const held = this.#held.get(cause);
    if (!held) return;
    this.#held.delete(cause);
    // Reported only if it made the endpoints 503: a cause that ended in time was no news.
    if (held.timer) held.timer.cancel();
    else {
      this.#publish();
      this.#onReport({ cause, since: held.since, detail: held.detail, failing: false });
    }
  }

  /**
   * The causes reported failing (a cause's timer fires when its delay is over), which is what
   * failing() finds by the clock, as of the last turn the main thread ran.
   */
  #publish(): void {
    const reported = [...this.#held].filter(([, held]) => held.timer === undefined).map(([cause]) => cause);
    this.shared.publish({
      live: !reported.includes('unsynced') && !reported.includes('api-server'),
      nodeEligible: !this.#held.has('node'),
      lastUpdated: this.#lastUpdated,
    });
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
