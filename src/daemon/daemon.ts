// The daemon's wiring: informers → model → sync loop → live dataplane, with health, metrics and
// health-check-node-port listeners around it. Everything with I/O (API client, dataplane, clock,
// listeners) comes in from the caller, so tests run the real wiring against a stand-in API server
// and a fake or namespaced dataplane.
//
// Stopping leaves the kernel rules exactly as the last sync wrote them: traffic keeps flowing
// while kproxy restarts, and the next start adopts them (LiveDataplane.start) instead of flushing.
import type { Logger } from 'pino';
import type { LiveDataplane, SyncKind, SyncOutcome } from '../../dataplanes/shared/dataplane.ts';
import type { ProxyConfig } from '../cli/config.ts';
import { toProxyOptions } from '../cli/proxy-options.ts';
import type { BackoffOptions } from '../kube/backoff.ts';
import type { KubeApi } from '../kube/client.ts';
import type { InformerEvent } from '../kube/informer.ts';
import { createInformerMetrics } from '../kube/informer-metrics.ts';
import type { Node } from '../kube/objects.ts';
import { createProxyInformers, startAll, stopAll, waitForAllSynced } from '../kube/proxy-informers.ts';
import { ModelCache } from '../model/model-cache.ts';
import type { DualStackState, ServicePortKey } from '../model/proxy-state.ts';
import type { Clock } from '../sync/clock.ts';
import { ProxyMetrics } from '../sync/metrics.ts';
import { StateCounter } from '../sync/state-counts.ts';
import { SyncLoop, type SyncLoopEvent } from '../sync/sync-loop.ts';
import { trackApiContact } from './api-contact.ts';
import { healthHandler, ProxyHealth } from './health.ts';
import { HealthCheckNodePorts } from './health-check-node-ports.ts';
import { type HttpListener, type ListenOptions, listenHttp, parseHostPort } from './http-listener.ts';
import { metricsHandler } from './metrics-handler.ts';
import { lastResortCollector } from './release-memory.ts';

export interface DaemonDeps {
  readonly config: ProxyConfig;
  readonly logger: Logger;
  readonly api: KubeApi;
  /** Informer retry pacing; tests shorten it. */
  readonly informerBackoff?: BackoffOptions;
  readonly dataplane: LiveDataplane;
  readonly clock: Clock;
  /** Where health-check node ports listen; every address by default, as kube-proxy. */
  readonly healthCheckHost?: string;
  /** Created by the daemon when not given; tests pass one without process metrics. */
  readonly metrics?: ProxyMetrics;
}

export interface Daemon {
  readonly metrics: ProxyMetrics;
  readonly health: ProxyHealth;
  /** Bound addresses (useful when the config asked for port 0). */
  readonly healthzUrl: string | undefined;
  readonly metricsUrl: string | undefined;
  /** Stop syncing and listening; the rules stay. */
  stop(): Promise<void>;
}

export type DaemonStart =
  | { readonly ok: true; readonly daemon: Daemon }
  | { readonly ok: false; readonly error: string };

interface StateSummary {
  readonly servicePorts: number;
  readonly endpoints: number;
}

/** Start serving health and metrics, then sync as soon as the informers have synced. */
export async function startDaemon(deps: DaemonDeps): Promise<DaemonStart> {
  const { config, logger, dataplane, clock } = deps;
  const metrics = deps.metrics ?? new ProxyMetrics(config.mode);
  // kube-proxy's healthTimeout: a queued change not synced within two sync periods.
  const health = new ProxyHealth(clock, 2 * config.syncPeriodMs);
  const informers = createProxyInformers({
    api: trackApiContact(deps.api, clock, (event) => {
      health.apiContact(event);
      if (event.type === 'lost') logger.warn('lost contact with the API server; rules stay as they are');
      else logger.info('API server reachable again');
    }),
    nodeName: config.nodeName,
    logger,
    metrics: createInformerMetrics(metrics.registry),
    ...(deps.informerBackoff ? { backoff: deps.informerBackoff } : {}),
  });
  // Refused requests are counted, and logged only at debug: a flood must not flood the log.
  const refusals = (listener: string): ListenOptions => ({
    onRefused: (refusal) => {
      metrics.httpRefused(listener, refusal.reason);
      logger.debug({ listener, ...refusal }, 'HTTP request refused');
    },
  });
  const healthCheckPorts = new HealthCheckNodePorts({
    host: deps.healthCheckHost ?? '::',
    proxyHealthy: () => health.live().healthy,
    listenOptions: refusals('health-check-node-port'),
  });
  const listeners: HttpListener[] = [];
  const closeListeners = () => Promise.all(listeners.map((l) => l.close()));

  const served = (path: '/healthz' | '/livez', code: number) =>
    path === '/healthz' ? metrics.healthzServed(code) : metrics.livezServed(code);
  const healthz = await listenOn(
    'healthzBindAddress',
    config.healthzBindAddress,
    healthHandler(health, served),
    refusals('healthz'),
  );
  if (!healthz.ok) return healthz;
  if (healthz.listener) listeners.push(healthz.listener);
  const metricsServer = await listenOn(
    'metricsBindAddress',
    config.metricsBindAddress,
    metricsHandler(metrics, config.mode),
    refusals('metrics'),
  );
  if (!metricsServer.ok) {
    await closeListeners();
    return metricsServer;
  }
  if (metricsServer.listener) listeners.push(metricsServer.listener);

  // Fed by informer events, so a sync recomputes only the services that changed since the last one.
  const model = new ModelCache(toProxyOptions(config));
  const counter = new StateCounter();
  let lastState: DualStackState = {};
  let healthChecksOwed = false;
  let summary: StateSummary = { servicePorts: 0, endpoints: 0 };
  let reportedProblems = new Set<string>();

  const syncer = {
    async sync(kind: SyncKind): Promise<SyncOutcome> {
      const { state, changed, full, problems } = await model.updateInSlices();
      reportedProblems = logNewProblems(logger, problems, reportedProblems);
      metrics.problemsCounted(problems.length);
      const previous = lastState;
      lastState = state;
      const counts = counter.update(state, full ? undefined : changed);
      summary = { servicePorts: counts.servicePorts, endpoints: counts.endpoints };
      metrics.noLocalEndpointsCounted({ internal: counts.noLocalInternal, external: counts.noLocalExternal });
      // The health-check listeners follow the health-check node ports and local endpoint counts,
      // which only changed service ports can move. Until an update succeeds (this sync may fail
      // before it), every sync retries it.
      healthChecksOwed ||= full || touchesHealthChecks(previous, state, changed);
      // After a failed sync the loop asks for a full one, so `changed` is always relative to the
      // state of the last sync that ran.
      const outcome = await dataplane.sync(state, kind, kind === 'incremental' ? changed : undefined);
      if (healthChecksOwed) {
        const ports = await healthCheckPorts.update(state);
        healthChecksOwed = ports.failed.length > 0;
        for (const { port, error } of ports.failed) {
          logger.warn({ port, err: error }, 'cannot open health check node port; retrying on the next sync');
        }
      }
      return outcome;
    },
    intact: () => dataplane.intact(),
  };

  const releaseMemory = lastResortCollector();
  const loop = new SyncLoop({
    clock,
    syncer,
    minSyncPeriodMs: config.minSyncPeriodMs,
    syncPeriodMs: config.syncPeriodMs,
    fullSyncPeriodMs: config.fullSyncPeriodMs,
    onEvent: (event) => {
      metrics.observe(event);
      health.observe(event);
      logSyncEvent(logger, event, summary);
      // A full sync's peak leaves free heap pages mapped: give them back (release-memory.ts), once
      // the work it left to the background is done too.
      if (event.type === 'synced' && event.outcome.kind === 'full') {
        void (dataplane.settled?.() ?? Promise.resolve()).then(() => setImmediate(releaseMemory));
      }
    },
  });
  // Nothing is programmed yet: the initial state is a pending change, so /healthz turns 503 if
  // the first sync does not happen in time (an API server that never answers, for one).
  loop.requestSync({ full: true });

  informers.services.onChange((event) => {
    if (event.type === 'delete') model.deleteService(event.object);
    else model.setService(event.object);
    metrics.serviceChanged();
    loop.requestSync();
  });
  informers.endpointSlices.onChange((event) => {
    if (event.type === 'delete') model.deleteEndpointSlice(event.object);
    else model.setEndpointSlice(event.object);
    metrics.endpointSliceChanged(clock.now(), event.type === 'delete' ? undefined : event.object);
    loop.requestSync();
  });
  informers.node.onChange((event) => {
    health.nodeChanged(event.type === 'delete' ? undefined : event.object);
    // Node labels (topology zone), addresses and pod CIDRs feed every service's decisions.
    if (nodeSettingsChanged(event)) {
      model.setNode(event.type === 'delete' ? undefined : event.object);
      loop.requestSync({ full: true });
    }
  });

  try {
    await dataplane.start();
  } catch (error) {
    // The first sync is full and replaces whatever is there, so this costs only the adoption.
    logger.warn({ err: error }, 'could not adopt the rules of an earlier run; the first sync replaces them');
  }
  const waiting = new AbortController();
  startAll(informers);
  logger.info({ mode: config.mode, node: config.nodeName }, 'waiting for informers to sync');
  const synced = waitForAllSynced(informers, waiting.signal).then(
    () => {
      logger.info('informers synced; starting the sync loop');
      loop.start();
    },
    () => {},
  );

  let stopping: Promise<void> | undefined;
  const daemon: Daemon = {
    metrics,
    health,
    healthzUrl: healthz.listener?.url,
    metricsUrl: metricsServer.listener?.url,
    stop() {
      stopping ??= (async () => {
        waiting.abort();
        await synced;
        await loop.stop();
        await stopAll(informers);
        await healthCheckPorts.close();
        await closeListeners();
        logger.info('stopped; rules left in place');
      })();
      return stopping;
    },
  };
  return { ok: true, daemon };
}

/** An empty bind address disables that server, as in kube-proxy. */
async function listenOn(
  field: string,
  address: string,
  handler: Parameters<typeof listenHttp>[2],
  options: ListenOptions,
): Promise<
  { readonly ok: true; readonly listener?: HttpListener } | { readonly ok: false; readonly error: string }
> {
  if (address === '') return { ok: true };
  const parsed = parseHostPort(address);
  if (!parsed) return { ok: false, error: `${field}: ${JSON.stringify(address)} is not an IP:port address` };
  try {
    return { ok: true, listener: await listenHttp(parsed.host, parsed.port, handler, options) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return { ok: false, error: `${field}: cannot listen on ${address}: ${code}` };
  }
}

/** Whether a Node event changes what the model derives from the node (not just heartbeats). */
export function nodeSettingsChanged(event: InformerEvent<Node>): boolean {
  if (event.type !== 'update') return true;
  const relevant = (node: Node) =>
    JSON.stringify([
      node.metadata.labels ?? {},
      node.spec?.podCIDRs ?? [],
      node.spec?.podCIDR ?? '',
      node.status?.addresses ?? [],
    ]);
  return relevant(event.old) !== relevant(event.object);
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
  problems: readonly { readonly object: string; readonly reason: string }[],
  seen: ReadonlySet<string>,
): Set<string> {
  const now = new Set<string>();
  for (const problem of problems) {
    const key = `${problem.object}: ${problem.reason}`;
    now.add(key);
    if (!seen.has(key)) logger.warn({ object: problem.object }, `skipped: ${problem.reason}`);
  }
  return now;
}

/** One line per sync with counts and durations. */
function logSyncEvent(logger: Logger, event: SyncLoopEvent, summary: StateSummary): void {
  switch (event.type) {
    case 'synced':
      logger.info(
        {
          kind: event.outcome.kind,
          requested: event.requested,
          reason: event.reason,
          durationMs: event.durationMs,
          servicePorts: summary.servicePorts,
          endpoints: summary.endpoints,
          objects: event.outcome.objectCount,
          conntrackDeleted: event.outcome.conntrackEntriesDeleted,
        },
        'rules synced',
      );
      return;
    case 'failed':
      logger.error(
        {
          requested: event.requested,
          reason: event.reason,
          durationMs: event.durationMs,
          retryInMs: event.retryInMs,
          err: event.error,
        },
        'sync failed; retrying with a full sync',
      );
      return;
    case 'checked':
      logger.debug('periodic check: rules intact');
      return;
    case 'queued':
      return;
  }
}
