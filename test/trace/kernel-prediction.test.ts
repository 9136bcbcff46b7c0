// The tracer's prediction against real packets: a random cluster on a two-node namespace lab,
// each mode's rendered rules loaded in the nodes, and a few hundred random flows from outside,
// from pods and from the node itself, to every kind of service address, to ports a ClusterIP does
// not serve and to service-CIDR addresses no Service holds. What the tracer says must be what
// happens: which endpoints may answer, whether they see the client's address or the node's,
// refused versus silently dropped. Node-0 is synced by the live dataplane, as `kproxy run` does,
// and `trace --live`'s reading of its kernel must predict the same as the rendered rules. Flows
// are probed IN_FLIGHT at a time (topo.connect: a long-lived client per namespace), so the wall
// time is the lab's setup plus a few drop timeouts, not a process start per flow.
// Sweep its seeds (as root): nice -n 10 node scripts/sweep-seeds.ts test/trace/kernel-prediction.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DualStackState, ServicePort } from '../../contract/proxy-state.ts';
import { IptablesDataplane } from '../../dataplanes/iptables/live.ts';
import { iptablesPlanner } from '../../dataplanes/iptables/planner.ts';
import { NftablesDataplane } from '../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../dataplanes/nftables/nft-runner.ts';
import { nftablesPlanner } from '../../dataplanes/nftables/planner.ts';
import type { CommandRunner } from '../../dataplanes/shared/command-runner.ts';
import type { TracePacket } from '../../dataplanes/shared/trace/packet.ts';
import { Lab } from '../../harness/netns.ts';
import { endpoint, proxyState, servicePort } from '../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4, type NodeInfo, type PodInfo, Topology } from '../../harness/topology.ts';
import { readLiveRules, ruleTracer, type TraceMode } from '../../src/cli/trace.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';
import { checkFlow, comparable, inBatches } from './flow-check.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces, nft and iptables';
const SEEDS = testSeeds();
process.stdout.write(seedsLine('the tracer ≡ real packets', SEEDS));
const SERVICES = 8;
const FLOWS_PER_MODE = 300;
const IN_FLIGHT = 32;
const ATTEMPTS = 2;
/**
 * How long a flow the tracer says is dropped (or routed nowhere) waits per attempt. Answers and
 * refusals come in milliseconds, so a shorter wait can only miss a late answer (a test that passes
 * when it should not), never fail a right prediction; flows the tracer says are answered wait
 * topology's ANSWER_TIMEOUT_MS.
 */
const DROP_TIMEOUT_MS = 1_500;
const LB_PREFIX = '192.168.7';
const SERVICE_CIDR = '10.96.1.0/24';
/** An address of SERVICE_CIDR that no Service holds (cluster IPs are .10 to .17). */
const UNALLOCATED_IP = '10.96.1.99';
/** A port no service port uses (they serve 80). */
const UNSERVED_PORT = 81;

interface ServiceShape {
  readonly name: string;
  readonly clusterIP: string;
  readonly pods: readonly PodInfo[];
  readonly nodePort: number;
  readonly loadBalancerIP?: string;
  readonly sourceRanges: readonly string[];
  readonly externalLocal: boolean;
  readonly internalLocal: boolean;
  readonly affinity: boolean;
}

function randomCluster(random: () => number, topo: Topology): ServiceShape[] {
  const pods = topo.nodes.flatMap((node) => node.pods);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  return Array.from({ length: SERVICES }, (_, i) => {
    const chosen = pods.filter(() => random() < 0.45).slice(0, 3);
    const loadBalancer = random() < 0.5;
    const nodePort = loadBalancer || random() < 0.5 ? 30100 + i : 0;
    return {
      name: `svc-${i}`,
      clusterIP: `10.96.1.${10 + i}`,
      pods: chosen,
      nodePort,
      ...(loadBalancer && { loadBalancerIP: `${LB_PREFIX}.${10 + i}` }),
      sourceRanges:
        loadBalancer && random() < 0.4 ? [pick([`${topo.client.ipv4}/32`, '203.0.113.0/24'])] : [],
      externalLocal: nodePort > 0 && random() < 0.4,
      internalLocal: random() < 0.2,
      affinity: random() < 0.2,
    };
  });
}

function stateFor(node: NodeInfo, services: readonly ServiceShape[]): DualStackState {
  const ports: ServicePort[] = services.map((shape) => {
    const clusterEndpoints = shape.pods.map((pod) =>
      endpoint(pod.ipv4, 8080, { isLocal: pod.nodeName === node.name }),
    );
    return servicePort(shape.name, {
      clusterIP: shape.clusterIP,
      nodePort: shape.nodePort,
      loadBalancerIPs: shape.loadBalancerIP ? [shape.loadBalancerIP] : [],
      loadBalancerSourceRanges: shape.sourceRanges,
      externalPolicyLocal: shape.externalLocal,
      internalPolicyLocal: shape.internalLocal,
      ...(shape.affinity && { sessionAffinity: { timeoutSeconds: 600 } }),
      clusterEndpoints,
      localEndpoints: clusterEndpoints.filter((e) => e.isLocal),
    });
  });
  return {
    IPv4: proxyState('IPv4', ports, {
      nodeName: node.name,
      nodeIPs: [node.ipv4],
      localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
      serviceCIDRs: [SERVICE_CIDR],
    }),
  };
}

async function load(lab: Lab, ns: string, mode: TraceMode, rules: string): Promise<void> {
  if (mode === 'nftables') {
    await lab.exec(ns, 'nft', ['-f', '-'], { input: rules });
    return;
  }
  // The restore inputs: render's nfacct step is none (and this state's rules count in no nfacct object).
  for (const part of rules.split(/^(?=# ip6?tables-restore)/m).filter((p) => p.startsWith('# ip'))) {
    const tool = part.startsWith('# ip6') ? 'ip6tables-restore' : 'iptables-restore';
    await lab.exec(ns, tool, ['--noflush'], { input: part });
  }
}

const PLANNERS = { nftables: nftablesPlanner, iptables: iptablesPlanner } as const;

/** Syncs `state` into a namespace the way `kproxy run` does. */
async function liveSync(mode: TraceMode, commands: CommandRunner, state: DualStackState): Promise<void> {
  const dataplane =
    mode === 'nftables'
      ? new NftablesDataplane({ nft: commandNftRunner(commands), commands, log: () => {} })
      : new IptablesDataplane({ runner: commands });
  await dataplane.start();
  assert.equal((await dataplane.sync(state, 'full')).kind, 'full');
  // Its `nft -i` session would hold the namespace to the end of the process.
  if (dataplane instanceof NftablesDataplane) dataplane.close();
}

interface Flow {
  readonly n: number;
  readonly from: 'client' | 'pod' | 'node';
  readonly ns: string;
  readonly packet: TracePacket;
  readonly service: string;
}

describe('the tracer predicts real packets', { skip: isRoot ? false : ROOT_REASON }, () => {
  // One lab for both modes: each mode's rules are loaded, probed, then flushed with the
  // connections they tracked.
  let lab: Lab;
  let topo: Topology;
  before(async () => {
    lab = new Lab('trace-kernel');
    topo = await Topology.create(lab, { podsPerNode: [3, 2] });
    for (const pod of topo.nodes.flatMap((n) => n.pods)) await topo.startEcho(pod, { tcp: [8080] });
    // The outside world reaches service and LB addresses through node-0.
    for (const cidr of ['10.96.1.0/24', `${LB_PREFIX}.0/24`])
      await lab.addRoute(topo.client.ns, [cidr, 'via', topo.nodes[0]!.ipv4]);
    // The kernel sends a peer one ICMP error per second after a burst of 6 (icmp_ratelimit):
    // with flows in flight, a REJECT would often be silent. The nodes lift that limit.
    for (const node of topo.nodes) {
      await lab.sysctl(node.ns, 'net.ipv4.icmp_ratelimit', '0');
      await lab.sysctl(node.ns, 'net.ipv4.icmp_msgs_per_sec', '100000');
    }
  });
  after(() => lab?.destroy());

  for (const seed of SEEDS)
    for (const mode of ['nftables', 'iptables'] as const) {
      describe(`${mode} (seed ${seed})`, () => {
        let services: ServiceShape[];
        let rulesOfNode0 = '';
        let liveRulesOfNode0 = '';
        const random = prng(seed + (mode === 'nftables' ? 0 : 1));

        before(async () => {
          services = randomCluster(random, topo);
          const planner = PLANNERS[mode] as typeof nftablesPlanner;
          const [node0, node1] = topo.nodes;
          rulesOfNode0 = planner.render(planner.planFull(stateFor(node0!, services)));
          const commands = lab.runner(node0!.ns);
          await liveSync(mode, commands, stateFor(node0!, services));
          liveRulesOfNode0 = await readLiveRules(mode, commands);
          await load(lab, node1!.ns, mode, planner.render(planner.planFull(stateFor(node1!, services))));
        });
        // iptables here is iptables-nft: flushing the ruleset removes either mode's rules.
        after(async () => {
          for (const node of topo.nodes) {
            await lab.exec(node.ns, 'nft', ['flush', 'ruleset']);
            await lab.exec(node.ns, 'conntrack', ['-F']);
          }
        });

        test(`${FLOWS_PER_MODE} random flows (seed ${seed}) end where the trace says`, async () => {
          const node0 = topo.nodes[0]!;
          const host = { localAddresses: [node0.ipv4, '10.244.1.1'] };
          const podOf = new Map(
            topo.nodes.flatMap((n) => n.pods).map((pod) => [`${pod.ipv4}:8080`, pod.name]),
          );
          const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
          const flows: Flow[] = Array.from({ length: FLOWS_PER_MODE }, (_, n) => {
            const service = pick(services);
            const destinations: [string, number][] = [
              [service.clusterIP, 80],
              [service.clusterIP, 80],
              ...(service.nodePort ? [[node0.ipv4, service.nodePort] as [string, number]] : []),
              ...(service.loadBalancerIP ? [[service.loadBalancerIP, 80] as [string, number]] : []),
              [service.clusterIP, UNSERVED_PORT],
              [UNALLOCATED_IP, 80],
            ];
            const [destination, port] = pick(destinations);
            const from = pick(['client', 'pod', 'node'] as const);
            const pod = pick(node0.pods);
            const source = from === 'client' ? topo.client.ipv4 : from === 'pod' ? pod.ipv4 : node0.ipv4;
            const via = from === 'client' ? 'external' : from;
            const ns = from === 'client' ? topo.client.ns : from === 'pod' ? pod.ns : node0.ns;
            const packet: TracePacket = {
              source,
              sourcePort: 40000,
              destination,
              port,
              protocol: 'tcp',
              via,
            };
            return { n, from, ns, packet, service: service.name };
          });
          const kinds = new Map<string, number>();
          const rendered = ruleTracer(mode, rulesOfNode0, host);
          const readBack = ruleTracer(mode, liveRulesOfNode0, host);
          await inBatches(flows, IN_FLIGHT, async ({ n, from, ns, packet, service }) => {
            const outcomes = rendered(packet).branches.map((b) => b.outcome);
            const live = readBack(packet);
            assert.deepEqual(
              comparable(live.branches.map((b) => b.outcome)),
              comparable(outcomes),
              `seed ${seed} flow ${n}: trace --live agrees with the rendered rules`,
            );
            const kind = outcomes[0]?.kind ?? 'none';
            kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
            const silent = kind === 'drop' || kind === 'no-service';
            const seen = await topo.connect(ns, 'tcp', packet.destination, packet.port, {
              count: ATTEMPTS,
              ...(silent && { timeoutMs: DROP_TIMEOUT_MS }),
            });
            const what = `seed ${seed} flow ${n}: ${from} ${packet.source} -> ${packet.destination}:${packet.port} (${service}), predicted ${JSON.stringify(outcomes)}`;
            checkFlow(what, outcomes, seen, packet.source, podOf, host.localAddresses);
          });
          // The cluster is random; the flows must still meet the outcomes that tell modes apart
          // (nftables rejects unserved ClusterIP ports and drops unallocated service addresses).
          for (const kind of mode === 'nftables' ? ['dnat', 'reject', 'drop'] : ['dnat', 'no-service'])
            assert.ok(
              (kinds.get(kind) ?? 0) > 0,
              `seed ${seed}: no flow ended in ${kind}: ${JSON.stringify([...kinds])}`,
            );
        });
      });
    }
});
