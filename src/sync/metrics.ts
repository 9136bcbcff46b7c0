// The daemon's Prometheus metrics, with kube-proxy's names (pkg/proxy/metrics) where the meaning
// is the same, so existing dashboards and alerts keep working after a switch. A Registry of our
// own rather than prom-client's global default: tests build as many daemons as they like.
import { Counter, collectDefaultMetrics, Gauge, Histogram, linearBuckets, Registry } from 'prom-client';
import { CommandTimeoutError } from '../../dataplanes/shared/command-runner.ts';
import type { DataplaneMode } from '../../dataplanes/shared/dataplane.ts';
import { DataplaneError } from '../../dataplanes/shared/dataplane-error.ts';
import { type EndpointSlice, LAST_CHANGE_TRIGGER_TIME_ANNOTATION } from '../kube/objects.ts';
import type { DualStackState } from '../model/proxy-state.ts';
import { trafficDecisions } from '../model/traffic-decisions.ts';
import type { SyncLoopEvent } from './sync-loop.ts';

/** kube-proxy's ExponentialBuckets(0.001, 2, 15). */
const SYNC_BUCKETS = Array.from({ length: 15 }, (_, i) => 0.001 * 2 ** i);

/** kube-proxy's network programming buckets: 0.25s, 0.5s, 1..59s, 60..115s by 5, 2..5min by 30s. */
const NETWORK_PROGRAMMING_BUCKETS = [
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** kube-proxy counts sync failures under a per-mode name. */
const FAILURE_COUNTER: Record<DataplaneMode, { readonly name: string; readonly help: string }> = {
  nftables: {
    name: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
    help: 'Cumulative proxy nftables sync failures',
  },
  iptables: {
    name: 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
    help: 'Cumulative proxy iptables restore failures',
  },
  ipvs: {
    name: 'kproxy_sync_proxy_rules_ipvs_sync_failures_total',
    help: 'Cumulative proxy IPVS sync failures',
  },
};

export interface NoLocalEndpoints {
  readonly internal: number;
  readonly external: number;
}

/**
 * Service ports whose Local policy has no local endpoint, as kube-proxy counts them for
 * sync_proxy_rules_no_local_endpoints_total: per traffic policy, summed over both families. Only
 * the traffic that is DROPped for it counts; a service with no endpoint anywhere is REJECTed.
 */
export function countNoLocalEndpoints(state: DualStackState): NoLocalEndpoints {
  let internal = 0;
  let external = 0;
  for (const family of [state.IPv4, state.IPv6]) {
    for (const port of family?.servicePorts.values() ?? []) {
      const { internalVerdict, externalVerdict } = trafficDecisions(port);
      if (internalVerdict === 'drop') internal++;
      if (externalVerdict === 'drop') external++;
    }
  }
  return { internal, external };
}

/** The slice's last-change-trigger-time in ms since the epoch, when present and valid. */
export function lastChangeTriggerTime(slice: EndpointSlice): number | undefined {
  const text = slice.metadata.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

interface PendingTrigger {
  readonly receivedAt: number;
  readonly triggeredAt: number;
}

export class ProxyMetrics {
  readonly registry = new Registry();
  readonly #syncDuration: Histogram;
  readonly #fullSyncDuration: Histogram;
  readonly #partialSyncDuration: Histogram;
  readonly #networkProgramming: Histogram;
  readonly #lastSynced: Gauge;
  readonly #lastQueued: Gauge;
  readonly #noLocalEndpoints: Gauge<'traffic_policy'>;
  readonly #endpointChanges: Counter;
  readonly #serviceChanges: Counter;
  readonly #objects: Gauge;
  readonly #problems: Gauge;
  readonly #conntrackDeleted: Counter;
  readonly #failures: Counter;
  readonly #commandTimeouts: Counter<'command'>;
  readonly #bugs: Counter;
  readonly #healthz: Counter<'code'>;
  readonly #livez: Counter<'code'>;
  readonly #httpRefused: Counter<'listener' | 'reason'>;
  /** Trigger times of slice changes not yet covered by a successful sync. */
  #pendingTriggers: PendingTrigger[] = [];

  constructor(mode: DataplaneMode, options: { readonly processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#syncDuration = new Histogram({
      name: 'kubeproxy_sync_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds',
      buckets: SYNC_BUCKETS,
      registers,
    });
    this.#fullSyncDuration = new Histogram({
      name: 'kubeproxy_sync_full_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds for full resyncs',
      buckets: SYNC_BUCKETS,
      registers,
    });
    this.#partialSyncDuration = new Histogram({
      name: 'kubeproxy_sync_partial_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds for partial resyncs',
      buckets: SYNC_BUCKETS,
      registers,
    });
    this.#networkProgramming = new Histogram({
      name: 'kubeproxy_network_programming_duration_seconds',
      help: 'In Cluster Network Programming Latency in seconds',
      buckets: NETWORK_PROGRAMMING_BUCKETS,
      registers,
    });
    this.#lastSynced = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
      help: 'The last time proxy rules were successfully synced',
      registers,
    });
    this.#lastQueued = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
      help: 'The last time a sync of proxy rules was queued',
      registers,
    });
    this.#noLocalEndpoints = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
      help: 'Number of services with a Local traffic policy and no endpoints',
      labelNames: ['traffic_policy'],
      registers,
    });
    this.#endpointChanges = new Counter({
      name: 'kubeproxy_sync_proxy_rules_endpoint_changes_total',
      help: 'Cumulative proxy rules Endpoint changes',
      registers,
    });
    this.#serviceChanges = new Counter({
      name: 'kubeproxy_sync_proxy_rules_service_changes_total',
      help: 'Cumulative proxy rules Service changes',
      registers,
    });
    this.#objects = new Gauge({
      name: 'kproxy_sync_proxy_rules_objects',
      help: 'Rules, set elements or virtual servers owned by kproxy after the last sync',
      registers,
    });
    this.#problems = new Gauge({
      name: 'kproxy_sync_proxy_rules_skipped_problems',
      help: 'Objects or options the model skipped or partly ignored at the last sync (each is logged once)',
      registers,
    });
    this.#conntrackDeleted = new Counter({
      name: 'kubeproxy_conntrack_reconciler_deleted_entries_total',
      help: 'Cumulative conntrack flows deleted by conntrack reconciler',
      registers,
    });
    this.#failures = new Counter({ ...FAILURE_COUNTER[mode], registers });
    this.#commandTimeouts = new Counter({
      name: 'kproxy_sync_command_timeouts_total',
      help: 'Syncs that failed because an external command (nft, iptables-restore, ...) did not finish in time and was killed, by command',
      labelNames: ['command'],
      registers,
    });
    this.#bugs = new Counter({
      name: 'kproxy_sync_bugs_total',
      help: 'Syncs that failed on a bug in kproxy rather than on the kernel refusing a change (each is logged at error with its stack)',
      registers,
    });
    this.#healthz = new Counter({
      name: 'kubeproxy_proxy_healthz_total',
      help: 'Cumulative proxy healthz HTTP status',
      labelNames: ['code'],
      registers,
    });
    this.#livez = new Counter({
      name: 'kubeproxy_proxy_livez_total',
      help: 'Cumulative proxy livez HTTP status',
      labelNames: ['code'],
      registers,
    });
    this.#httpRefused = new Counter({
      name: 'kproxy_http_refused_requests_total',
      help: 'Requests and connections refused by the health, metrics and health check node port listeners, by reason',
      labelNames: ['listener', 'reason'],
      registers,
    });
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Feed every sync loop event here. */
  observe(event: SyncLoopEvent): void {
    switch (event.type) {
      case 'queued':
        this.#lastQueued.set(event.at / 1000);
        return;
      case 'checked':
        return;
      case 'failed':
        this.#failures.inc();
        if (event.error instanceof CommandTimeoutError)
          this.#commandTimeouts.inc({ command: event.error.command });
        if (!(event.error instanceof DataplaneError)) this.#bugs.inc();
        this.#observeDuration(event.requested, event.durationMs);
        return;
      case 'synced': {
        this.#observeDuration(event.outcome.kind, event.durationMs);
        const syncedAt = event.startedAt + event.durationMs;
        this.#lastSynced.set(syncedAt / 1000);
        this.#objects.set(event.outcome.objectCount);
        this.#conntrackDeleted.inc(event.outcome.conntrackEntriesDeleted);
        this.#observeNetworkProgramming(event.startedAt, syncedAt);
        return;
      }
    }
  }

  /** A Service was added, changed or deleted. */
  serviceChanged(): void {
    this.#serviceChanges.inc();
  }

  /** An EndpointSlice was added, changed or deleted (`slice` is the new one, if any). */
  endpointSliceChanged(receivedAt: number, slice: EndpointSlice | undefined): void {
    this.#endpointChanges.inc();
    const triggeredAt = slice && lastChangeTriggerTime(slice);
    if (triggeredAt !== undefined) this.#pendingTriggers.push({ receivedAt, triggeredAt });
  }

  /** Called with each state handed to the dataplane. */
  stateBuilt(state: DualStackState): void {
    this.noLocalEndpointsCounted(countNoLocalEndpoints(state));
  }

  /** stateBuilt for a caller that keeps the counts itself (the daemon, from the changed ports). */
  noLocalEndpointsCounted({ internal, external }: NoLocalEndpoints): void {
    this.#noLocalEndpoints.set({ traffic_policy: 'internal' }, internal);
    this.#noLocalEndpoints.set({ traffic_policy: 'external' }, external);
  }

  /** Bad input is skipped with a log line and shows here, so an alert can find it. */
  problemsCounted(count: number): void {
    this.#problems.set(count);
  }

  healthzServed(code: number): void {
    this.#healthz.inc({ code: String(code) });
  }

  livezServed(code: number): void {
    this.#livez.inc({ code: String(code) });
  }

  /** `listener`: healthz, metrics or health-check-node-port (not per port: ports come and go). */
  httpRefused(listener: string, reason: string): void {
    this.#httpRefused.inc({ listener, reason });
  }

  #observeDuration(kind: 'full' | 'incremental', durationMs: number): void {
    const seconds = durationMs / 1000;
    this.#syncDuration.observe(seconds);
    (kind === 'full' ? this.#fullSyncDuration : this.#partialSyncDuration).observe(seconds);
  }

  /** Changes received before the sync started are now in the kernel. */
  #observeNetworkProgramming(startedAt: number, syncedAt: number): void {
    const covered = this.#pendingTriggers.filter((p) => p.receivedAt <= startedAt);
    this.#pendingTriggers = this.#pendingTriggers.filter((p) => p.receivedAt > startedAt);
    for (const { triggeredAt } of covered) {
      // Clock skew between the control plane and this node can make the difference negative.
      if (syncedAt >= triggeredAt) this.#networkProgramming.observe((syncedAt - triggeredAt) / 1000);
    }
  }
}
