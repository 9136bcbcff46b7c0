// The daemon end to end in a lab node namespace, shared by the kernel tests that run `kproxy run`
// as a process there against the stand-in API server (a process on that namespace's loopback),
// with two pods running echo servers (TCP and UDP, port 8080).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import type { EchoOutcome } from '../../harness/echo-client.ts';
import { allowance } from '../../harness/emulation.ts';
import { KPROXY_BIN } from '../../harness/kproxy-bin.ts';
import { Lab, type LabProcess } from '../../harness/netns.ts';
import { Topology, tally } from '../../harness/topology.ts';
import { NODES, objectPath, type ResourceType } from '../../src/kube/resources.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const NODE_BIN = join(REPO, 'node_modules/.bin/node');
export const KPROXY = KPROXY_BIN;
const API_MAIN = join(REPO, 'harness/apiserver/main.ts');
const API_PORT = 6443;
const API = `http://127.0.0.1:${API_PORT}`;
export const CLUSTER_IP = '10.96.0.10';
export const NODE_PORT = 30080;
const TEST_PORTS = '40000-40999';

/**
 * From `kproxy run`'s start to its first sync of this one-service cluster (the longest wait on one
 * sync: later ones cost less): 2.1-3.2 s of CPU measured (node 2.1-2.6 s, ~1.4 s of it loading the
 * modules, and 0.3-0.6 s of nft/iptables children; a mode switch's cleanup included), so ~16 s at the
 * design load (harness/emulation.ts), and twice that. It bounds a hang, it is not a speed check.
 */
export const SYNC_DEADLINE_MS = allowance(35_000);
/**
 * SIGTERM to exit: stop() lets a sync or periodic check in flight finish (at most one sync), then
 * stops the informers and closes the listeners (milliseconds), and the process exits (~0.3 s; ~1 s
 * seen under load).
 */
export const STOP_DEADLINE_MS = SYNC_DEADLINE_MS + 5_000;
export const CLEAN_EXIT = { code: 0, signal: null };
/**
 * Probes while the rules change time out quickly (a dropped SYN is retried by eventually());
 * ANSWER_TIMEOUT_MS (the default) is for attempts that must be answered.
 */
const PROBE_TIMEOUT_MS = 1000;
/**
 * A request to a process in the node namespace (the stand-in API server, the daemon's listeners):
 * milliseconds of CPU, 5 s at the design load, stretched as every deadline is (in the VM a fixed 5 s
 * cut /proxyMode and /healthz answers short at load ~15, in runs with and without a shared cluster).
 */
const REQUEST_TIMEOUT_S = String(Math.ceil(allowance(5_000) / 1000));

function config(mode: string, extra: string): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ${mode}
hostnameOverride: node-0
clusterCIDR: 10.244.0.0/16
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
syncPeriod: 1s
minSyncPeriod: 100ms
conntrack:
  maxPerCore: 0
${extra}`;
}

/** web: ClusterIP and NodePort, port 80 → 8080 on the given pod IPs. */
export function webService() {
  const service = sampleService('default', 'web', { clusterIP: CLUSTER_IP });
  const spec = service.spec as { type: string; ports: Record<string, unknown>[] };
  spec.type = 'NodePort';
  spec.ports[0]!.nodePort = NODE_PORT;
  return service;
}

export function webSlice(addresses: readonly string[]) {
  return sampleEndpointSlice('default', 'web-abc', { service: 'web', addresses, nodeName: 'node-0' });
}

export interface Cluster {
  readonly topo: Topology;
  readonly nodeNs: string;
  /** The stand-in API server, a process in the node namespace reading control lines on stdin. */
  readonly api: LabProcess;
  /** Sends an object to the stand-in API server (inside the node namespace). */
  write(
    method: 'POST' | 'PUT' | 'DELETE',
    resource: ResourceType,
    object: Record<string, unknown>,
  ): Promise<void>;
  /** GET inside the node namespace: status code and body. */
  get(url: string): Promise<{ status: number; body: string }>;
  /** `kproxy run` in the cluster's mode, or in `mode`, with more flags when given. */
  startDaemon(mode?: string, flags?: readonly string[]): LabProcess;
  /** An outage as the daemon sees it: its connections to the API server are reset, ours are not. */
  blockApi(blocked: boolean): Promise<void>;
}

let labs = 0;

/**
 * A lab node with two echo pods and the stand-in API server; `apiArgs` go to its main.ts, and
 * `configExtra` (KubeProxyConfiguration lines) to every config file.
 */
export async function cluster(
  t: { after(fn: () => Promise<void>): void },
  mode: string,
  apiArgs: readonly string[] = [],
  configExtra = '',
): Promise<Cluster> {
  const lab = new Lab(`d${mode.slice(0, 3)}${++labs}`);
  t.after(() => lab.destroy());
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-e2e-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // One config per mode: a run in another mode than the cluster's is started with its own.
  for (const each of new Set([mode, 'iptables', 'nftables', 'ipvs'])) {
    await writeFile(join(dir, `config-${each}.yaml`), config(each, configExtra));
  }
  const topo = await Topology.create(lab, { podsPerNode: [2] });
  const nodeNs = topo.nodes[0]!.ns;
  // The simulated outage lets TEST_PORTS through; the kernel must never give one of them to the
  // daemon's own connections, or a retry would slip past the outage (3.5% of each) and "regain"
  // contact.
  await lab.sysctl(nodeNs, 'net.ipv4.ip_local_reserved_ports', TEST_PORTS);

  // The test's own requests use source ports the simulated outage (blockApi) lets through.
  const curl = (args: string[]) =>
    lab.exec(nodeNs, 'curl', ['-sS', '--max-time', REQUEST_TIMEOUT_S, '--local-port', TEST_PORTS, ...args], {
      reject: false,
    });
  const api = lab.spawn(nodeNs, NODE_BIN, [API_MAIN, '--port', String(API_PORT), ...apiArgs], {
    stdin: true,
  });
  const c: Cluster = {
    topo,
    nodeNs,
    api,
    async write(method, resource, object) {
      const meta = object.metadata as { namespace?: string; name: string };
      const path = objectPath(resource, meta.namespace, method === 'POST' ? undefined : meta.name);
      const result = await curl([
        '-f',
        '-X',
        method,
        '-H',
        'Content-Type: application/json',
        ...(method === 'DELETE' ? [] : ['--data', JSON.stringify(object)]),
        `${API}${path}`,
      ]);
      if (result.exitCode !== 0) throw new Error(`${method} ${path}: ${result.stderr}`);
    },
    async get(url) {
      const result = await curl(['-w', '\n%{http_code}', url]);
      const lines = result.stdout.split('\n');
      return { status: Number(lines.pop()), body: lines.join('\n') };
    },
    startDaemon(other = mode, flags = []) {
      return lab.spawn(nodeNs, NODE_BIN, [
        KPROXY,
        'run',
        '--config',
        join(dir, `config-${other}.yaml`),
        '--master',
        API,
        ...flags,
      ]);
    },
    async blockApi(blocked) {
      const rule = `tcp dport ${API_PORT} tcp sport != ${TEST_PORTS} reject with tcp reset`;
      // ip, not inet: the API server is on 127.0.0.1, and the VM's kernel has nft_reject_ipv4.
      const script = blocked
        ? `table ip kptest-outage {\n chain out {\n type filter hook output priority -300;\n ${rule}\n }\n}\n`
        : 'delete table ip kptest-outage\n';
      await lab.exec(nodeNs, 'nft', ['-f', '-'], { input: script });
    },
  };
  // Started together: node processes start slowly under load, and very slowly in the VM.
  await Promise.all([
    api.waitFor('listening'),
    ...topo.nodes[0]!.pods.map((pod) => topo.startEcho(pod, { tcp: [8080], udp: [8080] })),
  ]);
  await c.write('POST', NODES, sampleNode('node-0', topo.nodes[0]!.ipv4));
  return c;
}

export const syncCount = (daemon: LabProcess) => daemon.output().split('"rules synced"').length - 1;

/** Which backends answered `count` probes (short timeouts: for use inside eventually()). */
export async function backends(c: Cluster, fromNs: string, host: string, port: number, count = 12) {
  return tally(await c.topo.connect(fromNs, 'tcp', host, port, { count, timeoutMs: PROBE_TIMEOUT_MS }));
}

/** kproxy's rules for `mode` in the node namespace, as the kernel lists them: '' when there are none. */
export async function ownRules(c: Cluster, mode: string): Promise<string> {
  const list = async (tool: string, args: string[]) =>
    (await c.topo.lab.exec(c.nodeNs, tool, args, { reject: false })).stdout;
  const nftTables = async () =>
    (await list('nft', ['list', 'tables']))
      .split('\n')
      .filter((line) => line.includes('kproxy'))
      .join('\n');
  if (mode === 'nftables') return nftTables();
  // IPVS: virtual servers (kproxy's are the only ones in a lab namespace) and the companion table.
  if (mode === 'ipvs') return `${(await list('ipvsadm', ['-Sn'])).trim()}\n${await nftTables()}`.trim();
  const saved = await Promise.all(
    ['iptables-nft-save', 'iptables-legacy-save'].map((tool) => list(tool, [])),
  );
  return saved
    .flatMap((text) => text.split('\n'))
    .filter((line) => line.includes('KPROXY-'))
    .join('\n');
}

/** Where a steady client connects: from a namespace to host:port. */
export interface SteadyTarget {
  readonly fromNs: string;
  readonly proto: 'tcp' | 'udp';
  readonly host: string;
  readonly port: number;
}

/** New connections per second and target while a rule set is replaced: the 20 and more. */
export const STEADY_PER_SECOND = 25;

/**
 * Opens a new connection (or sends a datagram from a new socket) to each target every
 * 1/STEADY_PER_SECOND s, each answered within ANSWER_TIMEOUT_MS or failed, until stop(), which
 * resolves with every attempt's outcome by target.
 */
export function steadyClient(c: Cluster, targets: readonly SteadyTarget[]) {
  const attempts = targets.map(() => [] as Promise<EchoOutcome[]>[]);
  const timer = setInterval(() => {
    targets.forEach((target, i) => {
      attempts[i]!.push(c.topo.connect(target.fromNs, target.proto, target.host, target.port));
    });
  }, 1000 / STEADY_PER_SECOND);
  return {
    /** Attempts started so far, per target. */
    started: () => attempts[0]!.length,
    async stop(): Promise<EchoOutcome[][]> {
      clearInterval(timer);
      return Promise.all(attempts.map(async (each) => (await Promise.all(each)).flat()));
    },
  };
}

/** The attempts of one steady target that failed, as "error:<code> xN" (empty when none did). */
export function failures(outcomes: readonly EchoOutcome[]): string[] {
  return [...tally(outcomes)]
    .filter(([name]) => name.startsWith('error:'))
    .map(([name, n]) => `${name} x${n}`);
}
