// The daemon's Prometheus metrics, with kube-proxy's names (pkg/proxy/metrics) where the meaning
// is the same, so existing dashboards and alerts keep working after a switch. A Registry of our
// own rather than prom-client's global default: tests build as many daemons as they like.
// Since 1.33 kube-proxy labels its sync metrics with ip_family (IPv4, IPv6): it runs one proxier
// per family. kproxy syncs both families in one step, so a sync, its duration and its failure
// count once under each family the node serves (those of the last state built). The conntrack
// reconciler's count and duration are its own per family, as upstream's.
// Every series a kube-proxy dashboard reads is there from the start at zero, for both families
// until the first state built says which the node serves, so a node stuck before its first sync
// shows zeros and an old last-synced time rather than "no data".
import { Counter, collectDefaultMetrics, Gauge, Histogram, linearBuckets, Registry } from 'prom-client';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import { CommandTimeoutError, DataplaneError } from '../../contract/dataplane-error.ts';
import type { NoLocalEndpointsByFamily } from './state-counts.ts';
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

/** When an endpoint change was triggered (ms since the epoch) and the family whose rules program it. */
export interface ChangeTrigger {
  readonly triggeredAt: number;
  readonly family: IPFamily;
}

interface PendingTrigger extends ChangeTrigger {
  readonly receivedAt: number;
}

type FamilyLabel = 'ip_family';

export class ProxyMetrics {
  readonly registry = new Registry();
  readonly #syncDuration: Histogram<FamilyLabel>;
  readonly #fullSyncDuration: Histogram<FamilyLabel>;
  readonly #partialSyncDuration: Histogram<FamilyLabel>;
  readonly #networkProgramming: Histogram<FamilyLabel>;
  readonly #lastSynced: Gauge<FamilyLabel>;
  readonly #lastQueued: Gauge<FamilyLabel>;
  readonly #noLocalEndpoints: Gauge<FamilyLabel | 'traffic_policy'>;
  readonly #endpointChanges: Counter;
  readonly #serviceChanges: Counter;
  readonly #endpointChangesPending: Gauge;
  readonly #serviceChangesPending: Gauge;
  /** iptables mode only, as in kube-proxy. */
  readonly #iptablesRules: Gauge<FamilyLabel | 'table'> | undefined;
  readonly #partialRestoreFailures: Counter<FamilyLabel> | undefined;
  readonly #objects: Gauge;
  readonly #problems: Gauge;
  readonly #conntrackDeleted: Counter<FamilyLabel>;
  readonly #conntrackDuration: Histogram<FamilyLabel>;
  readonly #failures: Counter<FamilyLabel>;
  /** nftables mode only, as in kube-proxy. */
  readonly #cleanupFailures: Counter<FamilyLabel> | undefined;
  readonly #commandTimeouts: Counter<'command'>;
  readonly #bugs: Counter;
  readonly #healthz: Counter<'code'>;
  readonly #livez: Counter<'code'>;
  readonly #httpRefused: Counter<'listener' | 'reason'>;
  /** Trigger times of slice changes not yet covered by a successful sync. */
  #pendingTriggers: PendingTrigger[] = [];
  /** When each change not yet covered by a successful sync was received (ms since the epoch). */
  #pendingEndpointChanges: number[] = [];
  #pendingServiceChanges: number[] = [];
  /** The families of the last state built (both before the first): the values of ip_family. */
  #families: readonly IPFamily[] = [];
  /** The last queued time, for a family first served after it. */
  #lastQueuedAt: number | undefined;

  constructor(mode: DataplaneMode, options: { readonly processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#syncDuration = new Histogram({
      name: 'kubeproxy_sync_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds',
      buckets: SYNC_BUCKETS,
      labelNames: ['ip_family'],
      registers,
    });
    this.#fullSyncDuration = new Histogram({
      name: 'kubeproxy_sync_full_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds for full resyncs',
      buckets: SYNC_BUCKETS,
      labelNames: ['ip_family'],
      registers,
    });
    this.#partialSyncDuration = new Histogram({
      name: 'kubeproxy_sync_partial_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds for partial resyncs',
      buckets: SYNC_BUCKETS,
      labelNames: ['ip_family'],
      registers,
    });
    this.#networkProgramming = new Histogram({
      name: 'kubeproxy_network_programming_duration_seconds',
      help: 'In Cluster Network Programming Latency in seconds',
      buckets: NETWORK_PROGRAMMING_BUCKETS,
      labelNames: ['ip_family'],
      registers,
    });
    this.#lastSynced = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
      help: 'The last time proxy rules were successfully synced',
      labelNames: ['ip_family'],
      registers,
    });
    this.#lastQueued = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
      help: 'The last time a sync of proxy rules was queued',
      labelNames: ['ip_family'],
      registers,
    });
    this.#noLocalEndpoints = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
      help: 'Number of services with a Local traffic policy and no endpoints',
      labelNames: ['ip_family', 'traffic_policy'],
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
    this.#endpointChangesPending = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
      help: 'Pending proxy rules Endpoint changes',
      registers,
    });
    this.#serviceChangesPending = new Gauge({
      name: 'kubeproxy_sync_proxy_rules_service_changes_pending',
      help: 'Pending proxy rules Service changes',
      registers,
    });
    this.#iptablesRules =
      mode === 'iptables'
        ? new Gauge({
            name: 'kubeproxy_sync_proxy_rules_iptables_total',
            help: 'Total number of iptables rules owned by kube-proxy',
            labelNames: ['ip_family', 'table'],
            registers,
          })
        : undefined;
    this.#partialRestoreFailures =
      mode === 'iptables'
        ? new Counter({
            name: 'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total',
            help: 'Cumulative proxy iptables partial restore failures',
            labelNames: ['ip_family'],
            registers,
          })
        : undefined;
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
      labelNames: ['ip_family'],
      registers,
    });
    this.#conntrackDuration = new Histogram({
      name: 'kubeproxy_conntrack_reconciler_sync_duration_seconds',
      help: 'ReconcileConntrackFlowsLatency latency in seconds',
      buckets: SYNC_BUCKETS,
      labelNames: ['ip_family'],
      registers,
    });
    this.#failures = new Counter({ ...FAILURE_COUNTER[mode], labelNames: ['ip_family'], registers });
    this.#cleanupFailures =
      mode === 'nftables'
        ? new Counter({
            name: 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
            help: 'Cumulative proxy nftables cleanup failures (kproxy deletes stale chains in the sync transaction itself, so a failed deletion is a sync failure and this stays 0)',
            labelNames: ['ip_family'],
            registers,
          })
        : undefined;
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
    this.#setFamilies(['IPv4', 'IPv6']);
  }

  /** Feed every sync loop event here. */
  observe(event: SyncLoopEvent): void {
    switch (event.type) {
      case 'queued':
        this.#lastQueuedAt = event.at;
        for (const ip_family of this.#families) this.#lastQueued.set({ ip_family }, event.at / 1000);
        return;
      case 'checked':
        return;
      case 'failed':
        for (const ip_family of this.#families) {
          this.#failures.inc({ ip_family });
          if (event.requested === 'incremental') this.#partialRestoreFailures?.inc({ ip_family });
        }
        if (event.error instanceof CommandTimeoutError)
          this.#commandTimeouts.inc({ command: event.error.command });
        if (!(event.error instanceof DataplaneError)) this.#bugs.inc();
        this.#observeDuration(event.requested, event.durationMs);
        return;
      case 'synced': {
        this.#observeDuration(event.outcome.kind, event.durationMs);
        const syncedAt = event.startedAt + event.durationMs;
        for (const ip_family of this.#families) this.#lastSynced.set({ ip_family }, syncedAt / 1000);
        this.#objects.set(event.outcome.objectCount);
        for (const { family: ip_family, table, rules } of event.outcome.iptablesRules ?? [])
          this.#iptablesRules?.set({ ip_family, table }, rules);
        for (const { family: ip_family, deleted, durationMs } of event.outcome.conntrack) {
          this.#conntrackDeleted.inc({ ip_family }, deleted);
          this.#conntrackDuration.observe({ ip_family }, durationMs / 1000);
        }
        this.#observeNetworkProgramming(event.startedAt, syncedAt);
        this.#pendingEndpointChanges = this.#pendingEndpointChanges.filter((at) => at > event.startedAt);
        this.#pendingServiceChanges = this.#pendingServiceChanges.filter((at) => at > event.startedAt);
        this.#endpointChangesPending.set(this.#pendingEndpointChanges.length);
        this.#serviceChangesPending.set(this.#pendingServiceChanges.length);
        return;
      }
    }
  }

  /** A Service was added, changed or deleted. */
  serviceChanged(receivedAt: number): void {
    this.#serviceChanges.inc();
    this.#pendingServiceChanges.push(receivedAt);
    this.#serviceChangesPending.set(this.#pendingServiceChanges.length);
  }

  /**
   * An EndpointSlice was added, changed or deleted; `trigger` when the change carries a trigger
   * time and programs rules (the latency metric runs from it).
   */
  endpointSliceChanged(receivedAt: number, trigger: ChangeTrigger | undefined): void {
    this.#endpointChanges.inc();
    this.#pendingEndpointChanges.push(receivedAt);
    this.#endpointChangesPending.set(this.#pendingEndpointChanges.length);
    if (trigger) this.#pendingTriggers.push({ receivedAt, ...trigger });
  }

  /**
   * The no-local-endpoints counts of the state handed to the dataplane (state-counts.ts). The
   * families present are the ones the node serves from now on: the ip_family of what follows.
   */
  noLocalEndpointsCounted(byFamily: NoLocalEndpointsByFamily): void {
    const families = (['IPv4', 'IPv6'] as const).filter((family) => byFamily[family] !== undefined);
    this.#setFamilies(families);
    for (const ip_family of families) {
      const { internal, external } = byFamily[ip_family]!;
      this.#noLocalEndpoints.set({ ip_family, traffic_policy: 'internal' }, internal);
      this.#noLocalEndpoints.set({ ip_family, traffic_policy: 'external' }, external);
    }
  }

  /** The per-family series: at 0 for a family newly served, gone for one no longer served. */
  #setFamilies(families: readonly IPFamily[]): void {
    for (const ip_family of families) {
      if (this.#families.includes(ip_family)) continue;
      for (const histogram of this.#familyHistograms()) histogram.zero({ ip_family });
      for (const counter of this.#familyCounters()) counter?.inc({ ip_family }, 0);
      this.#lastSynced.set({ ip_family }, 0);
      this.#lastQueued.set({ ip_family }, (this.#lastQueuedAt ?? 0) / 1000);
      for (const traffic_policy of ['internal', 'external'])
        this.#noLocalEndpoints.set({ ip_family, traffic_policy }, 0);
      for (const table of ['filter', 'nat']) this.#iptablesRules?.set({ ip_family, table }, 0);
    }
    for (const ip_family of this.#families) {
      if (families.includes(ip_family)) continue;
      for (const metric of [
        ...this.#familyHistograms(),
        ...this.#familyCounters(),
        this.#lastSynced,
        this.#lastQueued,
      ])
        metric?.remove({ ip_family });
      for (const traffic_policy of ['internal', 'external'])
        this.#noLocalEndpoints.remove({ ip_family, traffic_policy });
      for (const table of ['filter', 'nat', 'mangle']) this.#iptablesRules?.remove({ ip_family, table });
    }
    this.#families = families;
  }

  #familyHistograms(): Histogram<FamilyLabel>[] {
    return [
      this.#syncDuration,
      this.#fullSyncDuration,
      this.#partialSyncDuration,
      this.#networkProgramming,
      this.#conntrackDuration,
    ];
  }

  #familyCounters(): (Counter<FamilyLabel> | undefined)[] {
    return [this.#failures, this.#cleanupFailures, this.#partialRestoreFailures, this.#conntrackDeleted];
  }

  /** Bad input is skipped with a log line and shows here, so an alert can find it. */
  problemsCounted(count: number): void {
    this.#problems.set(count);
  }

  /** `count`: the health listener's thread counts its answers, and they come here in sums. */
  healthzServed(code: number, count = 1): void {
    this.#healthz.inc({ code: String(code) }, count);
  }

  livezServed(code: number, count = 1): void {
    this.#livez.inc({ code: String(code) }, count);
  }

  /** `listener`: healthz, metrics or health-check-node-port (not per port: ports come and go). */
  httpRefused(listener: string, reason: string, count = 1): void {
    this.#httpRefused.inc({ listener, reason }, count);
  }

  #observeDuration(kind: 'full' | 'incremental', durationMs: number): void {
    const seconds = durationMs / 1000;
    for (const ip_family of this.#families) {
      this.#syncDuration.observe({ ip_family }, seconds);
      (kind === 'full' ? this.#fullSyncDuration : this.#partialSyncDuration).observe({ ip_family }, seconds);
    }
  }

  /** Changes received before the sync started are now in the kernel. */
  #observeNetworkProgramming(startedAt: number, syncedAt: number): void {
    const covered = this.#pendingTriggers.filter((p) => p.receivedAt <= startedAt);
    this.#pendingTriggers = this.#pendingTriggers.filter((p) => p.receivedAt > startedAt);
    for (const { triggeredAt, family } of covered) {
      // Clock skew between the control plane and this node can make the difference negative.
      if (syncedAt >= triggeredAt)
        this.#networkProgramming.observe({ ip_family: family }, (syncedAt - triggeredAt) / 1000);
    }
  }
}
