// /healthz and /livez with kube-proxy's semantics (pkg/proxy/healthcheck/proxier_health.go), so
// load balancers and kubelet-style probes that know kube-proxy work unchanged:
// - unhealthy when a change has been queued for longer than the timeout (2 × syncPeriod) without a
//   successful sync: the loop is stuck or keeps failing;
// - also unhealthy when the API server has been out of reach for longer than the timeout: the
//   rules stay, but they no longer follow the cluster (see api-contact.ts);
// - /healthz is also 503 when this node is being deleted or is tainted for scale-down by the
//   cluster autoscaler, so load balancers drain it first; /livez ignores that.
import type { ServerResponse } from 'node:http';
import type { Node } from '../kube/objects.ts';
import type { Clock } from '../sync/clock.ts';
import type { SyncLoopEvent } from '../sync/sync-loop.ts';
import type { ContactEvent } from './api-contact.ts';

/** The taint the cluster autoscaler puts on a node it is about to remove. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

export interface HealthStatus {
  readonly healthy: boolean;
  readonly nodeEligible: boolean;
  readonly lastUpdated: number;
  readonly currentTime: number;
}

/** A node that is being deleted or drained by the autoscaler should stop receiving LB traffic. */
export function nodeEligible(node: Node | undefined): boolean {
  if (!node) return true;
  if (node.metadata.deletionTimestamp) return false;
  return !(node.spec?.taints ?? []).some((taint) => taint.key === TO_BE_DELETED_TAINT);
}

export class ProxyHealth {
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  #oldestQueued: number | undefined;
  #lastUpdated = 0;
  #nodeEligible = true;
  #apiLostAt: number | undefined;

  constructor(clock: Clock, timeoutMs: number) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
  }

  observe(event: SyncLoopEvent): void {
    switch (event.type) {
      case 'queued':
        this.#oldestQueued ??= event.at;
        return;
      case 'synced':
      case 'checked':
        this.#oldestQueued = undefined;
        this.#lastUpdated = this.#clock.now();
        return;
      case 'failed':
        return;
    }
  }

  nodeChanged(node: Node | undefined): void {
    this.#nodeEligible = nodeEligible(node);
  }

  apiContact(event: ContactEvent): void {
    this.#apiLostAt = event.type === 'lost' ? event.at : undefined;
  }

  /** Liveness only: syncs keep up with the cluster. */
  live(): HealthStatus {
    const currentTime = this.#clock.now();
    const fresh = (since: number | undefined) =>
      since === undefined || currentTime - since <= this.#timeoutMs;
    const healthy = fresh(this.#oldestQueued) && fresh(this.#apiLostAt);
    return { healthy, nodeEligible: this.#nodeEligible, lastUpdated: this.#lastUpdated, currentTime };
  }

  /** Readiness for load balancers: live, and this node is not going away. */
  healthz(): HealthStatus {
    const status = this.live();
    return { ...status, healthy: status.healthy && status.nodeEligible };
  }
}

/** The HTTP side: kube-proxy's body and status codes. `served` sees each answer (for metrics). */
export function healthHandler(
  health: ProxyHealth,
  served: (path: '/healthz' | '/livez', code: number) => void = () => {},
) {
  // The path comes from the listener (http-listener.ts), which has refused what cannot be parsed.
  return (path: string, response: ServerResponse): void => {
    if (path !== '/healthz' && path !== '/livez') {
      response.writeHead(404, { 'Content-Type': 'text/plain' }).end('404 page not found\n');
      return;
    }
    const status = path === '/healthz' ? health.healthz() : health.live();
    const code = status.healthy ? 200 : 503;
    // As kube-proxy does: a healthy answer reports lastUpdated as now, for older clients that
    // read it as "the loop ran recently".
    const lastUpdated = status.healthy ? status.currentTime : status.lastUpdated;
    const body: Record<string, unknown> = {
      lastUpdated: new Date(lastUpdated).toISOString(),
      currentTime: new Date(status.currentTime).toISOString(),
    };
    if (path === '/healthz') body.nodeEligible = status.nodeEligible;
    response
      .writeHead(code, { 'Content-Type': 'application/json', 'X-Content-Type-Options': 'nosniff' })
      .end(JSON.stringify(body));
    served(path, code);
  };
}
