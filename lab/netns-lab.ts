// The netns lab: a cluster on one machine. The stand-in API server runs in the underlay namespace
// (on br0, 10.100.0.1), every node namespace runs its own `kproxy run` against it, pod namespaces
// run the echo server, and the client namespace is the outside world (see harness/topology.ts
// for the addressing). Objects go to the API server; the daemons program their nodes.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataplaneMode } from '../contract/dataplane.ts';
import { standInKubeconfig } from '../harness/apiserver/kubeconfig.ts';
import { sampleNode } from '../harness/apiserver/sample-objects.ts';
import { allowance } from '../harness/emulation.ts';
import { KPROXY_BIN } from '../harness/kproxy-bin.ts';
import { Lab, type LabProcess } from '../harness/netns.ts';
import { CLUSTER_CIDR_V4, type PodInfo, Topology } from '../harness/topology.ts';
import { ENDPOINT_SLICES, NODES, objectPath, type ResourceType, SERVICES } from '../src/kube/resources.ts';
import {
  ECHO_TCP_PORT,
  ECHO_UDP_PORT,
  type HeldConnection,
  type HttpAnswer,
  type KubeJson,
  type LabDriver,
  type LabNode,
  type LabPod,
  type Outcome,
  type Place,
  type Protocol,
} from './driver.ts';
import { heldConnection, toOutcome } from './echo-output.ts';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const API_MAIN = join(REPO, 'harness/apiserver/main.ts');
const API_ADDRESS = '10.100.0.1';
const API = `http://${API_ADDRESS}:6443`;
const SYNCED = '"rules synced"';
/**
 * How long a node's kproxy gets from its start to its first sync of the lab's few services (later
 * syncs cost less): 2.1-3.2 s of CPU measured for one (most of it loading the modules), and both
 * nodes' daemons start at once: beside the design load's 10 tasks (harness/emulation.ts) each gets
 * a sixth of a core, ~19 s; twice that. It bounds a hang.
 */
const SYNC_DEADLINE_MS = allowance(40_000);
/**
 * SIGTERM to exit: kproxy's stop lets a sync or periodic check in flight finish (at most one sync),
 * then closes its informers and listeners (milliseconds), and the process exits (about a second).
 */
const STOP_DEADLINE_MS = SYNC_DEADLINE_MS + 5_000;

export interface NetnsLabOptions {
  readonly mode: DataplaneMode;
  readonly nodes?: number;
  readonly podsPerNode?: number;
  /** Keeps labs of one process apart ([a-z0-9-]); defaults to the mode. */
  readonly tag?: string;
}

function daemonConfig(mode: DataplaneMode, node: string): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ${mode}
hostnameOverride: ${node}
clusterCIDR: ${CLUSTER_CIDR_V4}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
syncPeriod: 5s
minSyncPeriod: 100ms
conntrack:
  maxPerCore: 0
`;
}

function resourceOf(object: KubeJson): ResourceType {
  return object.kind === 'Service' ? SERVICES : ENDPOINT_SLICES;
}

export class NetnsLab implements LabDriver {
  readonly name: string;
  readonly externalAddress: string;
  readonly #lab: Lab;
  readonly #topo: Topology;
  readonly #mode: DataplaneMode;
  readonly #configDir: string;
  readonly #echo = new Map<string, LabProcess>();
  readonly #daemons = new Map<string, LabProcess>();
  /** Every daemon started, restarted ones included, for their logs. */
  readonly #daemonHistory: { readonly node: string; readonly process: LabProcess }[] = [];

  private constructor(lab: Lab, topo: Topology, mode: DataplaneMode, configDir: string) {
    this.#lab = lab;
    this.#topo = topo;
    this.#mode = mode;
    this.#configDir = configDir;
    this.name = `netns/${mode}`;
    this.externalAddress = topo.client.ipv4;
  }

  /** Builds the lab and waits until every node's kproxy has synced; destroy() it afterwards. */
  static async start(options: NetnsLabOptions): Promise<NetnsLab> {
    const lab = new Lab(options.tag ?? options.mode);
    const configDir = await mkdtemp(join(tmpdir(), 'kproxy-lab-'));
    try {
      const podsPerNode = options.podsPerNode ?? 2;
      const topo = await Topology.create(lab, {
        podsPerNode: Array.from({ length: options.nodes ?? 2 }, () => podsPerNode),
      });
      const netnsLab = new NetnsLab(lab, topo, options.mode, configDir);
      // Started together: node processes start slowly under load, and very slowly in the VM.
      await Promise.all([
        netnsLab.#startApiServer(),
        ...topo.nodes.flatMap((n) => n.pods).map((pod) => netnsLab.#startEcho(pod)),
      ]);
      await Promise.all(topo.nodes.map((node) => netnsLab.#startDaemon(node.name, node.ns)));
      return netnsLab;
    } catch (error) {
      await lab.destroy();
      await rm(configDir, { recursive: true, force: true });
      throw error;
    }
  }

  get #kubeconfigPath(): string {
    return join(this.#configDir, 'kubeconfig');
  }

  /** The kubectl command line that reaches this lab's API server (in the underlay namespace), while it is up. */
  get kubectl(): string {
    return `ip netns exec ${this.#topo.underlay} kubectl --kubeconfig ${this.#kubeconfigPath}`;
  }

  /** Stops everything and deletes every namespace of the lab. */
  async destroy(): Promise<void> {
    await this.#lab.destroy();
    await rm(this.#configDir, { recursive: true, force: true });
  }

  nodes(): readonly LabNode[] {
    return this.#topo.nodes.map((n) => ({ name: n.name, address: n.ipv4 }));
  }

  pods(): readonly LabPod[] {
    return this.#topo.nodes.flatMap((n) =>
      n.pods.map((p) => ({ name: p.name, node: n.name, address: p.ipv4 })),
    );
  }

  /** What each node's daemons logged (JSON lines, restarts included): for reports and debugging. */
  daemonLogs(): ReadonlyMap<string, string> {
    const logs = new Map<string, string>();
    for (const { node, process } of this.#daemonHistory)
      logs.set(node, (logs.get(node) ?? '') + process.output());
    return logs;
  }

  async apply(object: KubeJson): Promise<void> {
    const resource = resourceOf(object);
    const { namespace, name } = object.metadata;
    const body = JSON.stringify(object);
    const put = await this.#request('PUT', objectPath(resource, namespace, name), body);
    if (put.status === 404) {
      const post = await this.#request('POST', objectPath(resource, namespace), body);
      if (post.status !== 201)
        throw new Error(`create ${object.kind} ${name}: HTTP ${post.status} ${post.body}`);
    } else if (put.status !== 200) {
      throw new Error(`update ${object.kind} ${name}: HTTP ${put.status} ${put.body}`);
    }
  }

  async remove(object: KubeJson): Promise<void> {
    const { namespace, name } = object.metadata;
    const result = await this.#request('DELETE', objectPath(resourceOf(object), namespace, name));
    if (result.status !== 200 && result.status !== 404) {
      throw new Error(`delete ${object.kind} ${name}: HTTP ${result.status} ${result.body}`);
    }
  }

  async connect(
    from: Place,
    protocol: Protocol,
    host: string,
    port: number,
    options: { readonly count: number; readonly timeoutMs: number },
  ): Promise<Outcome[]> {
    const outcomes = await this.#topo.connect(this.#nsOf(from), protocol, host, port, options);
    return outcomes.map(toOutcome);
  }

  async hold(from: Place, host: string, port: number): Promise<HeldConnection> {
    const proc = await this.#topo.holdConnection(this.#nsOf(from), host, port);
    return heldConnection(proc.output, () => proc.kill());
  }

  async httpGet(from: Place, url: string): Promise<HttpAnswer> {
    return this.#curl(this.#nsOf(from), [url]);
  }

  async restartBackend(pod: string): Promise<void> {
    await this.#echo.get(pod)?.kill();
    await this.#startEcho(this.#topo.pod(pod));
  }

  async restartProxies(): Promise<void> {
    await Promise.all(
      this.#topo.nodes.map(async (node) => {
        // A clean stop, as systemd would ask for: a daemon killed mid-sync is another scenario.
        await this.#daemons.get(node.name)?.stop(STOP_DEADLINE_MS);
        await this.#startDaemon(node.name, node.ns);
      }),
    );
  }

  #nsOf(place: Place): string {
    if (place.kind === 'external') return this.#topo.client.ns;
    if (place.kind === 'pod') return this.#topo.pod(place.pod).ns;
    const node = this.#topo.nodes.find((n) => n.name === place.node);
    if (!node) throw new Error(`no node ${place.node} in the lab`);
    return node.ns;
  }

  async #startApiServer(): Promise<void> {
    const underlay = this.#topo.underlay;
    await this.#lab.addAddress(underlay, 'br0', `${API_ADDRESS}/24`);
    const api = this.#lab.spawn(underlay, process.execPath, [
      API_MAIN,
      '--host',
      API_ADDRESS,
      '--port',
      '6443',
    ]);
    await api.waitFor('listening');
    await writeFile(this.#kubeconfigPath, standInKubeconfig(API));
    for (const node of this.#topo.nodes) {
      const result = await this.#request(
        'POST',
        objectPath(NODES, undefined),
        JSON.stringify(sampleNode(node.name, node.ipv4)),
      );
      if (result.status !== 201)
        throw new Error(`create node ${node.name}: HTTP ${result.status} ${result.body}`);
    }
  }

  async #startEcho(pod: PodInfo): Promise<void> {
    this.#echo.set(pod.name, await this.#topo.startEcho(pod, { tcp: [ECHO_TCP_PORT], udp: [ECHO_UDP_PORT] }));
  }

  async #startDaemon(node: string, ns: string): Promise<void> {
    const config = join(this.#configDir, `${node}.yaml`);
    await writeFile(config, daemonConfig(this.#mode, node));
    const daemon = this.#lab.spawn(ns, process.execPath, [
      KPROXY_BIN,
      'run',
      '--config',
      config,
      '--master',
      API,
    ]);
    this.#daemons.set(node, daemon);
    this.#daemonHistory.push({ node, process: daemon });
    await daemon.waitFor(SYNCED, SYNC_DEADLINE_MS);
  }

  /** An API request from the underlay namespace, where the API server listens. */
  async #request(method: 'PUT' | 'POST' | 'DELETE', path: string, body?: string): Promise<HttpAnswer> {
    const args = ['-X', method];
    if (body !== undefined) args.push('-H', 'Content-Type: application/json', '--data-binary', '@-');
    return this.#curl(this.#topo.underlay, [...args, `${API}${path}`], body);
  }

  /** curl inside a namespace: the status (0 when nothing answered) and the body. */
  async #curl(ns: string, args: readonly string[], input = ''): Promise<HttpAnswer> {
    const result = await this.#lab.exec(
      ns,
      'curl',
      ['-sS', '--max-time', '5', '-w', '\n%{http_code}', ...args],
      {
        input,
        reject: false,
      },
    );
    const lines = result.stdout.split('\n');
    return { status: Number(lines.pop()) || 0, body: lines.join('\n') };
  }
}
