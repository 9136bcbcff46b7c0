// A daemon on a RecordingDataplane against a stand-in API server, for the daemon tests that watch
// what it asks of its dataplane and how its listeners answer, in the test's own process.
import assert from 'node:assert/strict';
import { type Clock, systemClock } from '../../contract/base/clock.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import {
  type ApiServerOptions,
  type StandInApiServer,
  startApiServer,
} from '../../harness/apiserver/server.ts';
import { startDaemon } from '../../src/daemon/daemon.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { ProxyMetrics } from '../../src/sync/metrics.ts';
import { capturedLogger } from '../support/captured-logger.ts';
import { freePort } from '../support/free-port.ts';
import { configFromYaml, FAST_CONFIG, RecordingDataplane } from './daemon-harness.ts';

/** The web Service (10.96.0.10), its slice, and the daemon's node: what most daemon tests serve. */
export function webCluster(api: StandInApiServer): void {
  api.state.apply(SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
  api.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('default', 'web-abc', { service: 'web' }));
  api.state.apply(NODES, sampleNode('node-1'));
}

export interface RecordingDaemonOptions {
  readonly apiOptions?: ApiServerOptions;
  /** What the server holds when the daemon starts (webCluster by default). */
  readonly objects?: (api: StandInApiServer) => void;
  /** The configuration's YAML (FAST_CONFIG by default). */
  readonly configYaml?: string;
  readonly clock?: Clock;
  readonly dataplane?: RecordingDataplane;
  readonly metrics?: ProxyMetrics;
}

/**
 * Starts the daemon, stopped after the test with its server and client. Informer retries come
 * within 100 ms; health check node ports listen on loopback only (this is the host's namespace).
 */
export async function startRecordingDaemon(
  t: { after(fn: () => Promise<unknown>): void },
  options: RecordingDaemonOptions = {},
) {
  const api = await startApiServer({ port: await freePort(), ...options.apiOptions });
  t.after(() => api.stop());
  (options.objects ?? webCluster)(api);
  const client = new KubeClient({ server: api.url });
  t.after(() => client.close());
  const config = await configFromYaml(options.configYaml ?? FAST_CONFIG);
  const dataplane = options.dataplane ?? new RecordingDataplane();
  const { logger, lines } = capturedLogger();
  const started = await startDaemon({
    config,
    logger,
    api: client,
    dataplane,
    clock: options.clock ?? systemClock,
    healthCheckHost: '127.0.0.1',
    informerBackoff: { initialMs: 20, maxMs: 100 },
    metrics: options.metrics ?? new ProxyMetrics('nftables', { processMetrics: false }),
  });
  assert.ok(started.ok, started.ok ? '' : started.error);
  const { daemon } = started;
  t.after(() => daemon.stop());
  return { api, config, dataplane, daemon, lines };
}
