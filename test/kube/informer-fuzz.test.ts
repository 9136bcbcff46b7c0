// Hundreds of random changes interleaved with injected faults (dropped watches, 410s, 500s, 429s,
// stalls, compaction, garbage lines): in the end the informer's store equals the server's state
// exactly, and the change notifications delivered that same final state for every key.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/kube/informer-fuzz.test.ts

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { allowance } from '../../harness/emulation.ts';
import type { EndpointSlice, Service } from '../../src/kube/objects.ts';
import { endpointSliceLabelSelector, serviceLabelSelector } from '../../src/kube/proxy-informers.ts';
import { ENDPOINT_SLICES, type ResourceType, SERVICES } from '../../src/kube/resources.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';
import {
  counterValue,
  eventually,
  expectedStore,
  startTestInformer,
  storeContents,
  TEST_HEADERS_TIMEOUT_MS,
} from './harness.ts';

/**
 * How long the informers may take to catch up with the server, and to show each injected fault:
 * a bound on a hang at the design load, where a seed's run takes seconds. Stretched on a busier
 * host, where every page of a relist can outlast the 500 ms headers timeout and is retried (seed
 * 191 at load ~40 caught up 32 s after its writes stopped).
 */
const CATCH_UP_MS = allowance(30_000);
const PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
const HEADLESS_LABEL = 'service.kubernetes.io/headless';

function randomChange(server: StandInApiServer, random: () => number, step: number): void {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const namespace = pick(['default', 'kube-system', 'team-a']);
  const name = `obj-${Math.floor(random() * 30)}`;
  const resource: ResourceType = random() < 0.5 ? SERVICES : ENDPOINT_SLICES;
  const roll = random();
  if (roll < 0.25) {
    server.state.delete(resource, namespace, name);
    return;
  }
  // Some objects belong to another proxy or to a headless service, and some are invalid: the
  // informer must leave all of those out, also when an object moves in or out of its selection.
  const labels: Record<string, string> = {};
  if (random() < 0.1) labels[PROXY_NAME_LABEL] = 'other-proxy';
  if (resource === ENDPOINT_SLICES && random() < 0.1) labels[HEADLESS_LABEL] = '';
  const port = random() < 0.03 ? 70000 : 1 + Math.floor(random() * 1000);
  const object =
    resource === SERVICES
      ? sampleService(namespace, name, { port, labels })
      : sampleEndpointSlice(namespace, name, {
          port,
          labels,
          addresses: Array.from(
            { length: 1 + Math.floor(random() * 3) },
            (_, i) => `10.244.${step % 250}.${i + 1}`,
          ),
        });
  server.state.apply(resource, object);
}

/**
 * What each request fault must leave in the informers' metrics once it has been served: a counter
 * that moves only for that fault (watch timeouts restart watches too, so a bare restart count
 * would pass with every fault ignored).
 */
const FAULT_EVIDENCE: Readonly<Record<string, { metric: string; reason: string }>> = {
  '500': { metric: 'kproxy_informer_errors_total', reason: 'server' },
  '429': { metric: 'kproxy_informer_errors_total', reason: 'throttled' },
  '410': { metric: 'kproxy_informer_errors_total', reason: 'expired' },
  // Past the headers timeout: the request fails on the client's side, as over a dead network.
  stall: { metric: 'kproxy_informer_errors_total', reason: 'network' },
  // Only when a watch was open to cut (see randomFault): a cut watch fails, it does not end cleanly.
  'drop watches': { metric: 'kproxy_informer_watch_restarts_total', reason: 'error' },
};

function randomFault(server: StandInApiServer, random: () => number, allowRetryAfter: boolean): string {
  const faults: [string, () => string | undefined][] = [
    ['drop watches', () => (server.faults.dropWatches() > 0 ? undefined : 'drop watches (none open)')],
    ['500', () => void server.faults.failNext(1 + Math.floor(random() * 3), 500)],
    ['429', () => void server.faults.failNext(1, 429, allowRetryAfter ? 1 : 0)],
    // Well past the client's headers timeout, so the client's timer fires first even when timers run
    // late (200 ms past it was not enough at load ~45: seed 1508): it fails as if the server hung.
    ['stall', () => void server.faults.stallNext(1, 2 * TEST_HEADERS_TIMEOUT_MS)],
    ['compact', () => void server.faults.compact()],
    ['410', () => void server.faults.expireNext(1)],
    ['garbage', () => void server.faults.writeToWatches('{"type":"MODIFIED","object":\n')],
    [
      'compact and drop',
      () => {
        server.faults.compact();
        server.faults.dropWatches();
        return undefined;
      },
    ],
  ];
  const [name, inject] = faults[Math.floor(random() * faults.length)]!;
  return inject() ?? name;
}

for (const watchList of [true, false]) {
  test(`after random changes and faults the store equals the server (${watchList ? 'watch-list' : 'list+watch'})`, async (t) => {
    const seeds = testSeeds();
    t.diagnostic(seedsLine('informer fuzz', seeds));
    for (const seed of seeds) {
      const random = prng(seed);
      // A short history: resuming watches regularly find their resourceVersion too old.
      const server = await startApiServer({ historyLimit: 150, bookmarkIntervalMs: 50 });
      const services = startTestInformer<Service>(server, SERVICES, {
        watchList,
        labelSelector: serviceLabelSelector(),
        pageSize: 7,
        random,
      });
      const slices = startTestInformer<EndpointSlice>(server, ENDPOINT_SLICES, {
        watchList,
        labelSelector: endpointSliceLabelSelector(),
        pageSize: 7,
        random,
      });
      try {
        const injected: string[] = [];
        for (let step = 0; step < 600; step++) {
          randomChange(server, random, step);
          if (random() < 0.06) injected.push(randomFault(server, random, injected.length < 2));
          if (random() < 0.3) await new Promise((r) => setTimeout(r, Math.floor(random() * 8)));
        }
        t.diagnostic(`seed ${seed} faults: ${injected.join(', ')}`);

        const selectService = (o: { metadata: { labels?: Readonly<Record<string, string>> } }) =>
          !(PROXY_NAME_LABEL in (o.metadata.labels ?? {}));
        const selectSlice = (o: { metadata: { labels?: Readonly<Record<string, string>> } }) =>
          selectService(o) && !(HEADLESS_LABEL in (o.metadata.labels ?? {}));
        await eventually(() => {
          assert.deepEqual(storeContents(services.informer), expectedStore(server, SERVICES, selectService));
          assert.deepEqual(
            storeContents(slices.informer),
            expectedStore(server, ENDPOINT_SLICES, selectSlice),
          );
        }, CATCH_UP_MS);
        // Every change reached the listeners: what they were told equals the store, key by key.
        assert.deepEqual(new Map(services.delivered), storeContents(services.informer));
        assert.deepEqual(new Map(slices.delivered), storeContents(slices.informer));
        assert.ok(
          services.informer.store.size > 5 && slices.informer.store.size > 5,
          `seed ${seed}: the run exercised real content`,
        );
        // Each injected fault was met and counted for what it is. A request fault waits for the next
        // GET, which comes within a watch's timeout (at most 3 s here) plus a backoff.
        const counted = async ({ metric, reason }: { metric: string; reason: string }) =>
          (await counterValue(services.registry, metric, { reason })) +
          (await counterValue(slices.registry, metric, { reason }));
        const evidence = [...new Set(injected)].flatMap((name) => {
          const expected = FAULT_EVIDENCE[name];
          return expected ? [{ name, ...expected }] : [];
        });
        await eventually(async () => {
          for (const expected of evidence) {
            assert.ok(
              (await counted(expected)) > 0,
              `seed ${seed}: fault "${expected.name}" shows in ${expected.metric}{reason="${expected.reason}"}`,
            );
          }
        }, CATCH_UP_MS);
      } finally {
        await services.close();
        await slices.close();
        await server.stop();
      }
    }
  });
}
