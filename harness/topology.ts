// A small cluster made of network namespaces, for kernel tests:
//
//   underlay ns: bridge br0 ── eth0 of every node ns (10.100.0.11+i, fd00:100::11+i)
//                          └── eth0 of the external client ns (10.100.0.200, fd00:100::200)
//   node i:  pod CIDR 10.244.(i+1).0/24 and fd00:244:(i+1)::/64, routes to the other nodes' pod CIDRs,
//            default route via the client (the outside world)
//   pod m on node i: 10.244.(i+1).(10+m) and fd00:244:(i+1)::(10+m), on a veth to its node
//
// Pods are ROUTED (a /32 per pod veth, gateway 10.244.x.1 / fe80::1), not bridged: every pod
// packet, including replies between pods of one node, crosses the node's IP stack and conntrack,
// as with Calico. A bridge would need br_netfilter (a host-wide module) for service replies
// between pods of the same node to be un-DNATed.
import { join } from 'node:path';
import { compareText } from '../contract/base/compare-text.ts';
import type { EchoOutcome, ProbeRequest } from './echo-client.ts';
import type { EchoReply } from './echo-server.ts';
import { type Lab, type LabProcess, START_DEADLINE_MS } from './netns.ts';

export interface PodInfo {
  readonly name: string;
  readonly ns: string;
  readonly nodeName: string;
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface NodeInfo {
  readonly name: string;
  readonly ns: string;
  readonly ipv4: string;
  readonly ipv6: string;
  readonly podCIDRv4: string;
  readonly podCIDRv6: string;
  readonly pods: readonly PodInfo[];
}

export interface ClientInfo {
  readonly ns: string;
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface TopologyOptions {
  /** Pods per node, e.g. [2, 1] = node-0 with two pods, node-1 with one. */
  readonly podsPerNode: readonly number[];
}

/**
 * connect()'s default per-attempt timeout, for attempts the rules let through: the echo server
 * greets within milliseconds on an idle machine, and has been seen to take ~1 s with CPU hogs and
 * other kernel tests beside it. The deadline bounds a hang; a test that expects a drop passes its
 * own, shorter timeout (the time it takes to call a silence a drop).
 */
export const ANSWER_TIMEOUT_MS = 5_000;

export interface ConnectOptions {
  readonly count?: number;
  /** Per attempt; ANSWER_TIMEOUT_MS by default. */
  readonly timeoutMs?: number;
  readonly source?: string;
}

export const CLUSTER_CIDR_V4 = '10.244.0.0/16';
export const CLUSTER_CIDR_V6 = 'fd00:244::/32';

const HARNESS_DIR = import.meta.dirname;

export class Topology {
  readonly lab: Lab;
  readonly underlay: string;
  readonly nodes: readonly NodeInfo[];
  readonly client: ClientInfo;
  /** One `echo-client --serve` per namespace probed from, started at its first probe. */
  readonly #probers = new Map<string, Promise<LabProcess>>();
  #probes = 0;

  constructor(lab: Lab, underlay: string, nodes: readonly NodeInfo[], client: ClientInfo) {
    this.lab = lab;
    this.underlay = underlay;
    this.nodes = nodes;
    this.client = client;
  }

  /** Builds the namespaces and links; the caller destroys `lab` (t.after). */
  static async create(lab: Lab, options: TopologyOptions): Promise<Topology> {
    const underlay = await lab.addNetns('ul');
    await lab.addBridge(underlay, 'br0');
    const nodes: NodeInfo[] = [];
    for (const [i, podCount] of options.podsPerNode.entries()) {
      nodes.push(await createNode(lab, underlay, i, podCount));
    }
    for (const node of nodes) {
      for (const other of nodes) {
        if (other === node) continue;
        await lab.addRoute(node.ns, [other.podCIDRv4, 'via', other.ipv4]);
        await lab.addRoute(node.ns, [other.podCIDRv6, 'via', other.ipv6]);
      }
    }
    const clientNs = await lab.addNetns('client');
    const client: ClientInfo = { ns: clientNs, ipv4: '10.100.0.200', ipv6: 'fd00:100::200' };
    await attachToUnderlay(lab, underlay, clientNs, 'cl', client.ipv4, client.ipv6);
    // The client stands for the outside world: nodes route everything unknown (e.g. a service
    // address nothing DNATs) to it, as real nodes have a default route.
    for (const node of nodes) {
      await lab.addRoute(node.ns, ['default', 'via', client.ipv4]);
      await lab.addRoute(node.ns, ['default', 'via', client.ipv6]);
    }
    return new Topology(lab, underlay, nodes, client);
  }

  pod(name: string): PodInfo {
    const pod = this.nodes.flatMap((n) => n.pods).find((p) => p.name === name);
    if (!pod) throw new Error(`no pod ${name}`);
    return pod;
  }

  /** Starts the echo server in a pod (its name is the pod name) and waits until it listens. */
  async startEcho(
    pod: PodInfo,
    ports: { tcp?: readonly number[]; udp?: readonly number[] },
  ): Promise<LabProcess> {
    const args = [join(HARNESS_DIR, 'echo-server.ts'), pod.name];
    if (ports.tcp?.length) args.push('--tcp', ports.tcp.join(','));
    if (ports.udp?.length) args.push('--udp', ports.udp.join(','));
    const proc = this.lab.spawn(pod.ns, process.execPath, args);
    await proc.waitFor('ready');
    return proc;
  }

  /**
   * Connects `count` times from a namespace to host:port; one outcome per attempt. The attempts
   * come from a long-lived client process in that namespace (no process start per probe).
   */
  async connect(
    fromNs: string,
    proto: 'tcp' | 'udp',
    host: string,
    port: number,
    options: ConnectOptions = {},
  ): Promise<EchoOutcome[]> {
    const probe: ProbeRequest = {
      id: ++this.#probes,
      proto,
      host,
      port,
      count: options.count ?? 1,
      timeoutMs: options.timeoutMs ?? ANSWER_TIMEOUT_MS,
      source: options.source,
    };
    const prober = await this.#prober(fromNs);
    // Its answer comes after the request: the prober's earlier output (a line a probe, ~1 MB over
    // the VM's IPVS takeover file) is not searched again for each probe.
    const since = prober.output().length;
    prober.send(`${JSON.stringify(probe)}\n`);
    // Each attempt ends by its timeout; the rest is the allowance for a busy machine (many probes
    // in flight in one prober, which is up: its start is bounded apart).
    const line = await prober.waitFor(
      `{"id":${probe.id},`,
      probe.count * probe.timeoutMs + START_DEADLINE_MS,
      since,
    );
    return (JSON.parse(line) as { outcomes: EchoOutcome[] }).outcomes;
  }

  /** The namespace's prober, once up: started by its first probe, shared by those made meanwhile. */
  #prober(ns: string): Promise<LabProcess> {
    let prober = this.#probers.get(ns);
    if (!prober) {
      const proc = this.lab.spawn(ns, process.execPath, [join(HARNESS_DIR, 'echo-client.ts'), '--serve'], {
        stdin: true,
      });
      prober = proc.waitFor('{"ready"').then(() => proc);
      this.#probers.set(ns, prober);
    }
    return prober;
  }

  /**
   * Opens one long-lived TCP connection, or one UDP flow (echo-client --hold); its output shows
   * whether it still echoes, and for UDP which backend answered each tick (every `tickMs`, the
   * client's HOLD_TICK_MS unless said).
   */
  async holdConnection(
    fromNs: string,
    host: string,
    port: number,
    proto: 'tcp' | 'udp' = 'tcp',
    tickMs?: number,
  ): Promise<LabProcess> {
    const args = [join(HARNESS_DIR, 'echo-client.ts'), proto, host, String(port), '--hold'];
    if (tickMs !== undefined) args.push('--tick', String(tickMs));
    const proc = this.lab.spawn(fromNs, process.execPath, args);
    await proc.waitFor('"name"');
    return proc;
  }
}

/** The names of the backends that answered, with how often. Errors are counted under "error:<code>". */
export function tally(outcomes: readonly EchoOutcome[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const o of outcomes) {
    const key = 'error' in o ? `error:${o.error}` : o.name;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return new Map([...counts].sort(([a], [b]) => compareText(a, b)));
}

/** The replies only (throws when an attempt failed): for checks on the source address seen. */
export function replies(outcomes: readonly EchoOutcome[]): EchoReply[] {
  return outcomes.map((o) => {
    if ('error' in o) throw new Error(`connection failed: ${o.error}`);
    return o;
  });
}

async function attachToUnderlay(
  lab: Lab,
  underlay: string,
  ns: string,
  port: string,
  ipv4: string,
  ipv6: string,
): Promise<void> {
  await lab.addVeth(ns, 'eth0', underlay, port);
  await lab.setMaster(underlay, port, 'br0');
  await lab.addAddress(ns, 'eth0', `${ipv4}/24`);
  await lab.addAddress(ns, 'eth0', `${ipv6}/64`);
}

async function createNode(lab: Lab, underlay: string, i: number, podCount: number): Promise<NodeInfo> {
  const name = `node-${i}`;
  const ns = await lab.addNetns(name);
  const ipv4 = `10.100.0.${11 + i}`;
  const ipv6 = `fd00:100::${11 + i}`;
  // No ICMP redirects: the client and other nodes share the node's underlay link, and a redirect
  // sent first uses up the ICMP rate limit that a REJECT's port-unreachable then needs.
  await lab.sysctl(ns, 'net.ipv4.conf.all.send_redirects', '0');
  await lab.sysctl(ns, 'net.ipv4.conf.default.send_redirects', '0');
  await attachToUnderlay(lab, underlay, ns, `n${i}`, ipv4, ipv6);
  await lab.sysctl(ns, 'net.ipv4.ip_forward', '1');
  await lab.sysctl(ns, 'net.ipv6.conf.all.forwarding', '1');
  const pods: PodInfo[] = [];
  for (let m = 0; m < podCount; m++) {
    const pod: PodInfo = {
      name: `${name}-pod-${m}`,
      ns: await lab.addNetns(`${name}-pod-${m}`),
      nodeName: name,
      ipv4: `10.244.${i + 1}.${10 + m}`,
      ipv6: `fd00:244:${i + 1}::${10 + m}`,
    };
    const hostIf = `p${m}`;
    await lab.addVeth(pod.ns, 'eth0', ns, hostIf);
    await lab.addAddress(pod.ns, 'eth0', `${pod.ipv4}/32`);
    await lab.addAddress(pod.ns, 'eth0', `${pod.ipv6}/128`);
    await lab.addRoute(pod.ns, [`10.244.${i + 1}.1`, 'dev', 'eth0', 'scope', 'link']);
    await lab.addRoute(pod.ns, ['default', 'via', `10.244.${i + 1}.1`, 'dev', 'eth0']);
    await lab.ip(pod.ns, ['-6', 'route', 'add', 'default', 'via', 'fe80::1', 'dev', 'eth0']);
    await lab.addAddress(ns, hostIf, `10.244.${i + 1}.1/32`);
    await lab.addAddress(ns, hostIf, 'fe80::1/64');
    await lab.addRoute(ns, [`${pod.ipv4}/32`, 'dev', hostIf]);
    await lab.addRoute(ns, [`${pod.ipv6}/128`, 'dev', hostIf]);
    pods.push(pod);
  }
  return {
    name,
    ns,
    ipv4,
    ipv6,
    podCIDRv4: `10.244.${i + 1}.0/24`,
    podCIDRv6: `fd00:244:${i + 1}::/64`,
    pods,
  };
}
