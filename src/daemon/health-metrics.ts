// Why /healthz and /livez answer 503, as a metric: kube-proxy counts the answers by code
// (kubeproxy_proxy_healthz_total, kubeproxy_proxy_livez_total, in metrics.ts) but has no metric
// for the cause; kproxy has more than one cause, so it says which holds, read at each scrape. The
// main thread's heartbeat (health-heartbeat.ts) is not among them: a scrape is rendered by the main
// thread, which runs then; a stall is logged when it ends.
import { Gauge, type Registry } from 'prom-client';
import { HEALTH_CAUSES, type ProxyHealth } from './health.ts';

export function registerHealthMetrics(registry: Registry, health: ProxyHealth): void {
  new Gauge({
    name: 'kproxy_proxy_unhealthy',
    help:
      '1 while this cause makes the health endpoints answer 503: unsynced (a queued change not ' +
      'synced within 2 x syncPeriod), api-server (the API server not followed as long), node ' +
      '(this node being deleted or drained by the cluster autoscaler: /healthz only)',
    labelNames: ['cause'],
    registers: [registry],
    collect() {
      const failing = new Set(health.failing().map((f) => f.cause));
      for (const cause of HEALTH_CAUSES) this.set({ cause }, failing.has(cause) ? 1 : 0);
    },
  });
}
