// The userspace forwarder of localhost NodePorts (nftables mode, src/daemon/localhost-node-ports.ts)
// against the kernel's path, on the same lab node and pod: the real `kproxy run` (nftables,
// --nodeport-addresses primary,localhost) in a node namespace, one NodePort Service whose one
// endpoint is a pod in its own namespace; from the node, new connections to 127.0.0.1:<nodePort>
// (the forwarder) and to <node IP>:<nodePort> (nftables DNAT), alternating, each timed to the
// pod's first byte (bench/first-byte.ts): sequential latency, then connections per second with
// 1 and 16 in flight, and the daemon's CPU time per 1,000 relayed connections.
//   node bench/localhost-node-ports.ts [--count 2000] [--seconds 5] [--rounds 3]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ENDPOINT_SLICES, SERVICES } from '../src/kube/resources.ts';
import { eventually } from '../test/daemon/daemon-harness.ts';
import {
  backends,
  cluster,
  NODE_BIN,
  NODE_PORT,
  SYNC_DEADLINE_MS,
  webService,
  webSlice,
} from '../test/daemon/netns-cluster.ts';
import { median, reportSection, round } from './measure.ts';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
  },
});

const cleanups: (() => Promise<void>)[] = [];
const t = { after: (fn: () => Promise<void>) => void cleanups.push(fn) };
const FIRST_BYTE = join(import.meta.dirname, 'first-byte.ts');

/** The daemon's user+system CPU time so far, in ms (clock ticks of /proc/PID/stat). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

try {
  const c = await cluster(t, 'nftables', [], 'nodePortAddresses:\n  - primary\n  - localhost\n');
  const node = c.topo.nodes[0]!;
  const pod = node.pods[1]!;
  await c.write('POST', SERVICES, webService());
  await c.write('POST', ENDPOINT_SLICES, webSlice([pod.ipv4]));
  const daemon = c.startDaemon();
  await daemon.waitFor('rules synced', SYNC_DEADLINE_MS);
  await eventually('127.0.0.1 answers', async () =>
    (await backends(c, c.nodeNs, '127.0.0.1', NODE_PORT, 2)).has(pod.name),
  );
  const paths = { forwarder: '127.0.0.1', kernel: node.ipv4 } as const;
  const run = async (host: string, args: string[]) =>
    JSON.parse(
      (await c.topo.lab.exec(c.nodeNs, NODE_BIN, [FIRST_BYTE, host, String(NODE_PORT), ...args])).stdout,
    );
  const figures: Record<string, Record<string, number[]>> = { forwarder: {}, kernel: {} };
  const add = (path: string, key: string, value: number) => {
    const list = figures[path]![key] ?? [];
    list.push(value);
    figures[path]![key] = list;
  };
  for (let pass = 0; pass < Number(values.rounds); pass++) {
    for (const [path, host] of Object.entries(paths)) {
      const latency = await run(host, ['latency', values.count!]);
      add(path, 'p50Us', latency.p50Us);
      add(path, 'p90Us', latency.p90Us);
      add(path, 'p99Us', latency.p99Us);
      for (const inFlight of [1, 16]) {
        const before = cpuMs(daemon.pid);
        const rate = await run(host, ['rate', values.seconds!, String(inFlight)]);
        add(path, `perSecond${inFlight}`, rate.perSecond);
        add(path, `daemonCpuMsPer1000_${inFlight}`, ((cpuMs(daemon.pid) - before) * 1000) / rate.connections);
      }
    }
  }
  const summary = Object.fromEntries(
    Object.entries(figures).map(([path, byKey]) => [
      path,
      Object.fromEntries(Object.entries(byKey).map(([key, list]) => [key, round(median(list))])),
    ]),
  );
  reportSection({ localhostNodePorts: summary, rounds: Number(values.rounds), raw: figures });
  await daemon.stop(SYNC_DEADLINE_MS);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
