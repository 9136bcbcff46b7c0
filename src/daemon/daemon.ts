// The daemon's wiring: informers → model → sync loop → live dataplane, with health, metrics and
// health-check-node-port listeners around it. Everything with I/O (API client, dataplane, clock,
// listeners) comes in from the caller, so tests run the real wiring against a stand-in API server
// and a fake or namespaced dataplane.
//
// Stopping leaves the kernel rules exactly as the last sync wrote them: traffic keeps flowing
// while kproxy restarts, and the next start adopts them (LiveDataplane.start) instead of flushing.
import type { Logger } from 'pino';
import type { Clock } from '../../contract/base/clock.ts';
import type { LiveDataplane } from '../../contract/dataplane.ts';
import type { DriftReader } from '../../dataplanes/shared/drift/drift-report.ts';
import type { ProxyConfig } from '../config/config.ts';
import { toProxyOptions } from '../config/proxy-options.ts';
import type { BackoffOptions } from '../kube/backoff.ts';
import { sliceChangeTrigger } from '../kube/change-trigger.ts';
import type { KubeApi } from '../kube/client.ts';
import { createInformerMetrics } from '../kube/informer-metrics.ts';
import {
  createProxyInformers,
  type ProxyInformers,
  startAll,
  stopAll,
  waitForAllSynced,
} from '../kube/proxy-informers.ts';
import { ModelCache } from '../model/model-cache.ts';
import { ProxyMetrics } from '../sync/metrics.ts';
import { logSyncEvent } from '../sync/sync-log.ts';
import { SyncLoop } from '../sync/sync-loop.ts';
import { SyncStep } from '../sync/sync-step.ts';
import { trackApiContact } from './api-contact.ts';
import { DriftWatch } from './drift-watch.ts';
import { ProxyHealth } from './health.ts';
import { HealthCheckNodePorts } from './health-check-node-ports.ts';
import { stalledAfterMs, startHeartbeat } from './health-heartbeat.ts';
import { listenHealth } from './health-listener.ts';
import { HealthListenerCounts } from './health-listener-counts.ts';
import { registerHealthMetrics } from './health-metrics.ts';
import { type HttpListener, type ListenOptions, listenHttp, parseHostPort } from './http-listener.ts';
import { metricsHandler } from './metrics-handler.ts';
import {
  INVALID_DROPPED_PACKETS,
  LOCALHOST_NODEPORT_PACKETS,
  type NfacctPacketMetric,
  type PacketCount,
  registerNfacctPackets,
} from './nfacct-packet-metrics.ts';
import { HeapGrowth, heapReleaser } from './release-memory.ts';

export interface DaemonDeps {
  readonly config: ProxyConfig;
  readonly logger: Logger;
  readonly api: KubeApi;
  /** Informer retry pacing; tests shorten it. */
  readonly informerBackoff?: BackoffOptions;
  readonly dataplane: LiveDataplane;
  readonly clock: Clock;
  /** Where health-check node ports listen; by default the NodePort addresses, as kube-proxy. */
  readonly healthCheckHost?: string;
  /** Created by the daemon when not given; tests pass one without process metrics. */
  readonly metrics?: ProxyMetrics;
  /**
   * kube-proxy's nfacct counters that kproxy run created (iptables mode, where the kernel has
   * nfacct): only those are counted by rules, and their metrics served.
   */
  readonly nfacctPackets?: ReadonlyMap<NfacctPacketMetric, PacketCount>;
  /** What an integrity check that found damage compares (`kproxy diff`'s comparison), if the mode has one. */
  readonly drift?: DriftReader;
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

/** Start listing and adopting, serve health and metrics, then sync as soon as the informers have synced. */
export async function startDaemon(deps: DaemonDeps): Promise<DaemonStart> {
  const { config, logger, dataplane, clock } = deps;
  const metrics = deps.metrics ?? new ProxyMetrics(config.mode);
  const healthTimeoutMs = 2 * config.syncPeriodMs;
  const health = reportingHealth(healthTimeoutMs, clock, logger);
  registerHealthMetrics(metrics.registry, health);
  // Refused requests are counted, and logged only at debug: a flood must not flood the log.
  const refusals = (listener: string): ListenOptions => ({
    onRefused: (refusal) => {
      metrics.httpRefused(listener, refusal.reason);
      logger.debug({ listener, ...refusal }, 'HTTP request refused');
    },
  });
  const healthCheckPorts = new HealthCheckNodePorts({
    ...(deps.healthCheckHost !== undefined && { host: deps.healthCheckHost }),
    proxyHealthy: () => health.live().healthy,
    listenOptions: refusals('health-check-node-port'),
  });
  const listeners: HttpListener[] = [];
  const closeListeners = () => Promise.all(listeners.map((l) => l.close()));

  const nfacctPackets = deps.nfacctPackets ?? new Map<NfacctPacketMetric, PacketCount>();
  registerNfacctMetrics(metrics, nfacctPackets, logger);
  // Fed by informer events, so a sync recomputes only the services that changed since the last one.
  const model = new ModelCache({
    ...toProxyOptions(config),
    localhostNodePortsCounter: nfacctPackets.has(LOCALHOST_NODEPORT_PACKETS),
    invalidDropsCounter: nfacctPackets.has(INVALID_DROPPED_PACKETS),
  });
  const informers = createProxyInformers({
    api: contactTracked(deps.api, clock, health, logger),
    nodeName: config.nodeName,
    ...(config.serviceProxyName ? { proxyName: config.serviceProxyName } : {}),
    logger,
    metrics: createInformerMetrics(metrics.registry),
    ...(deps.informerBackoff ? { backoff: deps.informerBackoff } : {}),
    // The Services' store keeps the model's key strings: one per Service.
    serviceKeyOf: (key) => model.serviceKeyOf(key),
  });
  const syncer = new SyncStep({ model, dataplane, healthChecks: healthCheckPorts, metrics, logger });
  const drift = new DriftWatch({ mode: config.mode, read: deps.drift, registry: metrics.registry, logger });

  const heapGrowth = new HeapGrowth();
  const releaseMemory = heapReleaser();
  const loop = new SyncLoop({
    clock,
    syncer: drift.watching(heapGrowth.capping(syncer), () => syncer.applied),
    minSyncPeriodMs: config.minSyncPeriodMs,
    syncPeriodMs: config.syncPeriodMs,
    fullSyncPeriodMs: config.fullSyncPeriodMs,
    onEvent: (event) => {
      metrics.observe(event);
      health.observe(event);
      drift.observe(event);
      logSyncEvent(logger, event, syncer.summary);
      // A full sync's peak leaves free heap pages mapped: give them back (release-memory.ts, only
      // when the heap grew by what that pause is worth), once the work it left to the background is
      // done too; from then on the old generation may grow further between collections.
      if (event.type === 'synced' && event.outcome.kind === 'full') {
        const liftHeapGrowth = heapGrowth.lifter();
        void (dataplane.settled?.() ?? Promise.resolve()).then(() =>
          setImmediate(() => {
            liftHeapGrowth();
            releaseMemory();
          }),
        );
      }
    },
  });
  // Nothing is programmed yet: the initial state is a pending change, so /healthz turns 503 if
  // the first sync does not happen in time (an API server that never answers, for one).
  loop.requestSync({ full: true });

  feedModel(informers, model, loop, { metrics, health, clock });

  // /healthz and /livez are answered on a thread of its own (health-listener.ts), started first:
  // its start (a second V8 instance: ~0.1 s of CPU, seconds on a loaded machine) overlaps the
  // list, the adoption and the first sync, which do not wait for it; it answers whatever this
  // thread does meanwhile, a tool's fork included.
  const stopHeartbeat = startHeartbeat(health.shared, healthTimeoutMs, (silentMs) =>
    logger.warn(
      { silentMs: Math.round(silentMs) },
      'the main thread did not run for longer than the health timeout (2 x syncPeriod): /healthz and /livez answered 503 meanwhile',
    ),
  );
  const healthCounts = new HealthListenerCounts();
  const healthzStarting = listenOn('healthzBindAddress', config.healthzBindAddress, (host, port) =>
    listenHealth(host, port, {
      state: health.shared,
      counts: healthCounts,
      stalledAfterMs: stalledAfterMs(healthTimeoutMs),
      ...(logger.isLevelEnabled('debug') && {
        onRefused: (refusal) => logger.debug({ listener: 'healthz', ...refusal }, 'HTTP request refused'),
      }),
      onFailure: (error) => {
        logger.fatal(
          { err: error },
          'the health listener failed; exiting, as kube-proxy with --bind-address-hard-fail',
        );
        throw error;
      },
    }),
  ).then((started) => {
    if (started.ok && started.listener) listeners.push(started.listener);
    return started;
  });

  // The list starts before the adoption: reading the kernel's tables (nft, another process)
  // overlaps the API server's answer instead of delaying it. The loop starts once both are done.
  // Both start before the metrics listener accepts: starting a tool is the start's longest
  // synchronous step (forking the process, tens of ms of the event loop's time), and a request
  // that comes meanwhile is better refused at once than held unanswered (docs/benchmarks-log.md).
  const waiting = new AbortController();
  startAll(informers);
  logger.info({ mode: config.mode, node: config.nodeName }, 'waiting for informers to sync');
  const adopted = dataplane.start().catch((error: unknown) => {
    // The first sync is full and replaces whatever is there, so this costs only the adoption.
    logger.warn({ err: error }, 'could not adopt the rules of an earlier run; the first sync replaces them');
  });
  const notListening = async <T>(failure: T): Promise<T> => {
    waiting.abort();
    stopHeartbeat();
    await healthzStarting;
    await closeListeners();
    await stopAll(informers);
    await adopted;
    return failure;
  };

  const renderMetrics = metricsHandler(metrics, config.mode);
  const metricsServer = await listenOn('metricsBindAddress', config.metricsBindAddress, (host, port) =>
    listenHttp(
      host,
      port,
      (path, response) => {
        // The health listener's answers and refusals so far, so the rendering includes them.
        foldHealthCounts(healthCounts, metrics);
        return renderMetrics(path, response);
      },
      refusals('metrics'),
    ),
  );
  if (!metricsServer.ok) return notListening(metricsServer);
  if (metricsServer.listener) listeners.push(metricsServer.listener);

  await adopted;
  const synced = waitForAllSynced(informers, waiting.signal).then(
    () => {
      logger.info('informers synced; starting the sync loop');
      loop.start();
    },
    () => {},
  );
  // A health listener that cannot listen fails the start all the same, if after a sync (as
  // kube-proxy's, whose healthz server starts beside its proxier): the loop stops too.
  const healthz = await healthzStarting;
  if (!healthz.ok) {
    const failed = await notListening(healthz);
    await synced;
    await loop.stop();
    return failed;
  }

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
        stopHeartbeat();
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
  listen: (host: string, port: number) => Promise<HttpListener>,
): Promise<
  { readonly ok: true; readonly listener?: HttpListener } | { readonly ok: false; readonly error: string }
> {
  if (address === '') return { ok: true };
  const parsed = parseHostPort(address);
  if (!parsed) return { ok: false, error: `${field}: ${JSON.stringify(address)} is not an IP:port address` };
  try {
    return { ok: true, listener: await listen(parsed.host, parsed.port) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return { ok: false, error: `${field}: cannot listen on ${address}: ${code}` };
  }
}

/** Health on kube-proxy's healthTimeout (2 × syncPeriod); each cause said once. */
function reportingHealth(timeoutMs: number, clock: Clock, logger: Logger): ProxyHealth {
  return new ProxyHealth(clock, timeoutMs, (report) => {
    const endpoints = report.cause === 'node' ? '/healthz' : '/healthz and /livez';
    if (report.failing) logger.warn({ cause: report.cause }, `${endpoints} answer 503: ${report.detail}`);
    else logger.info({ cause: report.cause }, `${endpoints} no longer 503 for: ${report.detail}`);
  });
}

/** What the health listener's thread counted since the last call, into the metrics. */
function foldHealthCounts(counts: HealthListenerCounts, metrics: ProxyMetrics): void {
  const { answers, refusals } = counts.take();
  for (const {
    what: [path, code],
    count,
  } of answers) {
    if (path === '/healthz') metrics.healthzServed(code, count);
    else metrics.livezServed(code, count);
  }
  for (const { what, count } of refusals) metrics.httpRefused('healthz', what, count);
}

/** The informers' API, whose answers tell health whether the cluster is still followed. */
function contactTracked(api: KubeApi, clock: Clock, health: ProxyHealth, logger: Logger): KubeApi {
  return trackApiContact(api, clock, (event) => {
    health.apiContact(event);
    if (event.type === 'lost') {
      const { resource, error } = event;
      logger.warn({ resource, error }, 'lost contact with the API server; rules stay as they are');
    } else logger.info('API server reachable again');
  });
}

/** kube-proxy's nfacct packet counts as metrics, each read at a scrape. */
function registerNfacctMetrics(
  metrics: ProxyMetrics,
  nfacctPackets: ReadonlyMap<NfacctPacketMetric, PacketCount>,
  logger: Logger,
): void {
  for (const [counted, packets] of nfacctPackets) {
    registerNfacctPackets(metrics.registry, counted, packets, (error) =>
      logger.warn(
        { error: String(error), counter: counted.counter },
        'nfacct packet count not read; the last one is served',
      ),
    );
  }
}

/** Informer events into the model, each asking the loop for a sync (full where every service's rules change). */
function feedModel(
  informers: ProxyInformers,
  model: ModelCache,
  loop: SyncLoop,
  { metrics, health, clock }: { metrics: ProxyMetrics; health: ProxyHealth; clock: Clock },
): void {
  informers.services.onChange((event) => {
    if (event.type === 'delete') model.deleteService(event.object);
    else model.setService(event.object, event.key);
    metrics.serviceChanged(clock.now());
    loop.requestSync();
  });
  informers.endpointSlices.onChange((event) => {
    // Under the informer's key string: the model's record keeps it instead of one more (~1 MiB).
    if (event.type === 'delete') model.deleteEndpointSlice(event.object, event.key);
    else model.setEndpointSlice(event.object, event.key);
    metrics.endpointSliceChanged(
      clock.now(),
      event.type === 'delete' ? undefined : sliceChangeTrigger(event.object),
    );
    loop.requestSync();
  });
  informers.node.onChange((event) => {
    const node = event.type === 'delete' ? undefined : event.object;
    health.nodeChanged(node);
    // The node's addresses, pod CIDRs and zone feed every service's decisions; a heartbeat none.
    if (model.setNode(node)) loop.requestSync({ full: true });
  });
  informers.serviceCIDRs.onChange((event) => {
    // The service CIDRs are in every family's fixed rules (nftables' cluster-ips-check).
    const changed =
      event.type === 'delete' ? model.deleteServiceCIDR(event.object) : model.setServiceCIDR(event.object);
    if (changed) loop.requestSync({ full: true });
  });
}
