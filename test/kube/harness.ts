// Shared set-up for informer tests: an informer against a stand-in server with a private metrics
// registry, a logger whose lines the test can read, and an independent view of what the informer's
// store should hold.

import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import type { StandInApiServer } from '../../harness/apiserver/server.ts';
import { allowance } from '../../harness/emulation.ts';
import { KubeClient } from '../../src/kube/client.ts';
import type { ClusterConnection } from '../../src/kube/connection.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import { Informer, type InformerEvent, type InformerOptions } from '../../src/kube/informer.ts';
import { createInformerMetrics, type InformerMetrics } from '../../src/kube/informer-metrics.ts';
import type { KubeObject } from '../../src/kube/objects.ts';
import { objectKey, type ResourceType } from '../../src/kube/resources.ts';
import { type CapturedLogger, capturedLogger } from '../support/captured-logger.ts';

export interface TestInformer<T extends KubeObject> {
  readonly informer: Informer<T>;
  readonly client: KubeClient;
  readonly registry: Registry;
  readonly metrics: InformerMetrics;
  readonly log: CapturedLogger;
  /** Per key, the last object the change notifications said exists (what a consumer would hold). */
  readonly delivered: Map<string, T>;
  readonly events: InformerEvent<T>[];
  close(): Promise<void>;
}

/**
 * The test informers' headers timeout: short, so a stalled request (faults.stallNext) fails fast.
 * One that times out under load is only one more fault: informers retry, and tests wait on results.
 * Stretched on a busier host (harness/emulation.ts): at load ~45 most answers outlasted 500 ms, so
 * an injected 429 was met by a request the client had already given up on, and counted as a
 * network error (informer-fuzz seed 231).
 */
export const TEST_HEADERS_TIMEOUT_MS = allowance(500);

export function startTestInformer<T extends KubeObject>(
  server: StandInApiServer,
  resource: ResourceType,
  options: Partial<InformerOptions<T>> & { readonly connection?: Partial<ClusterConnection> } = {},
): TestInformer<T> {
  const client = new KubeClient(
    { server: server.url, ...options.connection },
    { headersTimeoutMs: TEST_HEADERS_TIMEOUT_MS },
  );
  const registry = new Registry();
  const metrics = createInformerMetrics(registry);
  const log = capturedLogger();
  const informer = new Informer<T>({
    api: client,
    resource,
    decode: decodeObject,
    logger: log.logger,
    metrics,
    backoff: { initialMs: 5, maxMs: 100 },
    watchTimeoutSeconds: { min: 1, max: 3 },
    ...options,
  });
  const delivered = new Map<string, T>();
  const events: InformerEvent<T>[] = [];
  informer.onChange((event) => {
    events.push(event);
    const key = objectKey(event.object.metadata);
    if (event.type === 'delete') {
      assert.ok(delivered.has(key), `delete of ${key} that was never added`);
      delivered.delete(key);
    } else {
      if (event.type === 'add') assert.ok(!delivered.has(key), `add of ${key} that already exists`);
      else assert.ok(delivered.has(key), `update of ${key} that was never added`);
      delivered.set(key, event.object);
    }
  });
  informer.start();
  return {
    informer,
    client,
    registry,
    metrics,
    log,
    delivered,
    events,
    close: async () => {
      await informer.stop();
      await client.close();
    },
  };
}

/** What the informer's store must equal: the server's objects, selected and decoded. */
export function expectedStore(
  server: StandInApiServer,
  resource: ResourceType,
  select: (object: {
    metadata: { labels?: Readonly<Record<string, string>>; name: string };
  }) => boolean = () => true,
): Map<string, KubeObject> {
  const expected = new Map<string, KubeObject>();
  for (const record of server.state.snapshot(resource).records) {
    const raw = record.object();
    if (!select(raw)) continue;
    const decoded = decodeObject({ kind: resource.kind, apiVersion: resource.apiVersion, ...raw });
    if (decoded.kind === 'object') expected.set(objectKey(decoded.object.metadata), decoded.object);
  }
  return expected;
}

export function storeContents<T extends KubeObject>(informer: Informer<T>): Map<string, KubeObject> {
  return new Map(informer.store.list().map((o) => [objectKey(o.metadata), o]));
}

/** Polls until check() passes; the deadline only bounds a hang, it is not what the test asserts. */
export async function eventually(check: () => void | Promise<void>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

export async function counterValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((sum, v) => sum + v.value, 0);
}
