// The health listener's answers, with kube-proxy's bodies and status codes
// (pkg/proxy/healthcheck/proxier_health.go): /healthz and /livez, anything else 404. Pure: the
// listener's thread gives it the published state and the time.
import type { HealthCode, HealthPath } from './health-listener-counts.ts';
import type { PublishedHealth } from './health-shared-state.ts';

export interface HealthView extends PublishedHealth {
  /** The main thread has not beaten for the health timeout (health-heartbeat.ts): fails both. */
  readonly stalled: boolean;
}

export type HealthAnswer =
  | { readonly path: HealthPath; readonly status: HealthCode; readonly body: string }
  | { readonly path: undefined; readonly status: 404; readonly body: string };

export const HEALTH_HEADERS = { 'Content-Type': 'application/json', 'X-Content-Type-Options': 'nosniff' };
export const NOT_FOUND_HEADERS = { 'Content-Type': 'text/plain' };

/** The answer to `path` (decoded, as the listener gives it) at `now` (ms since the epoch). */
export function healthAnswer(path: string, view: HealthView, now: number): HealthAnswer {
  if (path !== '/healthz' && path !== '/livez')
    return { path: undefined, status: 404, body: '404 page not found\n' };
  const live = view.live && !view.stalled;
  const healthy = path === '/healthz' ? live && view.nodeEligible : live;
  // As kube-proxy does: a healthy answer reports lastUpdated as now, for older clients that
  // read it as "the loop ran recently".
  const body: Record<string, unknown> = {
    lastUpdated: new Date(healthy ? now : view.lastUpdated).toISOString(),
    currentTime: new Date(now).toISOString(),
  };
  if (path === '/healthz') body.nodeEligible = view.nodeEligible;
  return { path, status: healthy ? 200 : 503, body: JSON.stringify(body) };
}
