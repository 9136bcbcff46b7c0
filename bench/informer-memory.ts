// Memory check: 30,000 Services and 30,000 EndpointSlices of 10 endpoints, loaded through the real
// informers from the stand-in API server (in its own process, so its copy does not count), must sit
// in under 100 MiB of heap. Not timed; prints the heap figures and exits 1 over budget.
//   node --expose-gc bench/informer-memory.ts [--services N] [--endpoints E] [--watch-list false]

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { Registry } from 'prom-client';
import { KubeClient } from '../src/kube/client.ts';
import { createInformerMetrics } from '../src/kube/informer-metrics.ts';
import { createProxyInformers, startAll, stopAll, waitForAllSynced } from '../src/kube/proxy-informers.ts';
import { writeClusterList } from './synthetic-cluster.ts';

const BUDGET_MIB = 100;
const MIB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '30000' },
    endpoints: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '100' },
    'watch-list': { type: 'string', default: 'true' },
  },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const nodes = Number(values.nodes);

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('informer-memory: run with --expose-gc so the heap is measured after collection');
  process.exit(2);
}

function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-'));
await writeClusterList(join(dir, 'cluster.json'), { services, endpointsPerService: endpoints, nodes });
const server = spawn(process.execPath, ['harness/apiserver/main.ts', '--data', join(dir, 'cluster.json')], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
try {
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: server.stdout! }).once('line', (line) =>
      resolve(line.replace(/^listening /, '')),
    );
    server.once('exit', (code) => reject(new Error(`stand-in API server exited with ${code}`)));
  });

  const before = heapUsed();
  const client = new KubeClient({ server: url }, { listBodyTimeoutMs: 300_000 });
  const informers = createProxyInformers({
    api: client,
    nodeName: 'node-0',
    logger: pino({ level: 'warn' }),
    metrics: createInformerMetrics(new Registry()),
    watchList: values['watch-list'] !== 'false',
  });
  const started = process.hrtime.bigint();
  startAll(informers);
  await waitForAllSynced(informers);
  const loadSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = heapUsed();
  const held = (after - before) / MIB;
  console.log(
    JSON.stringify({
      services: informers.services.store.size,
      endpointSlices: informers.endpointSlices.store.size,
      endpointsPerSlice: endpoints,
      watchList: values['watch-list'] !== 'false',
      loadSeconds: Number(loadSeconds.toFixed(2)),
      heapBeforeMiB: Number((before / MIB).toFixed(1)),
      heapAfterMiB: Number((after / MIB).toFixed(1)),
      heldByInformersMiB: Number(held.toFixed(1)),
      budgetMiB: BUDGET_MIB,
    }),
  );
  await stopAll(informers);
  await client.close();
  if (informers.services.store.size !== services || informers.endpointSlices.store.size !== services) {
    console.error('informer-memory: the stores did not receive every object');
    process.exitCode = 1;
  } else if (after / MIB > BUDGET_MIB) {
    console.error(
      `informer-memory: heap ${(after / MIB).toFixed(1)} MiB is over the ${BUDGET_MIB} MiB budget`,
    );
    process.exitCode = 1;
  }
} finally {
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
