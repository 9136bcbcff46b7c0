// Real packets through the rendered ruleset: a two-node cluster of namespaces, kproxy's rules in
// the node namespaces, pods running the echo server, and a client outside the cluster.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runAll } from '../../../contract/base/work-slices.ts';
import type { DualStackState, ServicePort } from '../../../contract/proxy-state.ts';
import type { SlotRecord } from '../../../dataplanes/nftables/endpoint-slots.ts';
import { incrementalPlanSteps, nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import type { NftFamily } from '../../../dataplanes/shared/nft/transaction.ts';
import type { EchoOutcome } from '../../../harness/echo-client.ts';
import { Lab } from '../../../harness/netns.ts';
import {
  CLUSTER_CIDR_V4,
  CLUSTER_CIDR_V6,
  type PodInfo,
  replies,
  Topology,
  tally,
} from '../../../harness/topology.ts';
import { attemptsFor } from '../../../lab/scenarios/scenario.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';
import { nftLoad } from './kernel-support.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON =
  'needs root: network namespaces and nft (run the suite as root to include these kernel tests)';
if (!isRoot) process.stderr.write(`SKIPPED nftables packet tests: ${ROOT_REASON}\n`);

/** The service CIDR (IPv4): the client routes it to node-0. */
const SERVICE_CIDR_V4 = '10.96.0.0/16';

/** The LoadBalancer IP of the eTP Local service (its one endpoint is on node-0). */
const LOCAL_LB_IP = '192.168.6.8';

type Spec = Omit<Parameters<typeof servicePort>[1], 'clusterEndpoints'> & { pods?: readonly PodInfo[] };

/** A service port as node `nodeName` sees it: endpoints on that node are local. */
function portFor(nodeName: string, name: string, spec: Spec, v6 = false): ServicePort {
  const pods = spec.pods ?? [];
  const clusterEndpoints = pods.map((p) =>
    endpoint(v6 ? p.ipv6 : p.ipv4, spec.protocol === 'UDP' ? 5353 : 8080, {
      isLocal: p.nodeName === nodeName,
    }),
  );
  return servicePort(name, {
    ...spec,
    clusterEndpoints,
    localEndpoints: clusterEndpoints.filter((e) => e.isLocal),
  });
}

function names(outcomes: readonly EchoOutcome[]): string[] {
  return [...tally(outcomes).keys()];
}

describe('nftables ruleset with real packets', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let topo: Topology;
  let pod: (name: string) => PodInfo;
  const client = () => topo.client.ns;

  function stateFor(nodeName: string): DualStackState {
    const [a0, a1, a2] = topo.nodes[0]!.pods;
    const [b0, b1] = topo.nodes[1]!.pods;
    const ports: ServicePort[] = [
      portFor(nodeName, 'web', { clusterIP: '10.96.0.10', nodePort: 30080, pods: [a0!, b0!] }),
      portFor(nodeName, 'dns', {
        clusterIP: '10.96.0.53',
        protocol: 'UDP',
        port: 53,
        nodePort: 30053,
        pods: [a1!, b0!],
      }),
      portFor(nodeName, 'empty', { clusterIP: '10.96.0.99', nodePort: 30099 }),
      portFor(nodeName, 'local', {
        clusterIP: '10.96.0.20',
        nodePort: 30020,
        loadBalancerIPs: [LOCAL_LB_IP],
        externalPolicyLocal: true,
        pods: [a2!],
      }),
      portFor(nodeName, 'lb-allowed', {
        clusterIP: '10.96.0.21',
        loadBalancerIPs: ['192.168.6.6'],
        loadBalancerSourceRanges: [`${topo.client.ipv4}/32`],
        pods: [b1!],
      }),
      portFor(nodeName, 'lb-denied', {
        clusterIP: '10.96.0.22',
        loadBalancerIPs: ['192.168.6.7'],
        loadBalancerSourceRanges: ['203.0.113.0/24'],
        pods: [b1!],
      }),
      // Ranges that hold node-0's IP: its own traffic is let in (kube-proxy's TestLoadBalancer).
      portFor(nodeName, 'lb-node-0', {
        clusterIP: '10.96.0.23',
        loadBalancerIPs: ['192.168.6.9'],
        loadBalancerSourceRanges: [`${topo.nodes[0]!.ipv4}/32`],
        pods: [b1!],
      }),
      portFor(nodeName, 'sticky', {
        clusterIP: '10.96.0.30',
        sessionAffinity: { timeoutSeconds: 600 },
        pods: [a0!, a1!, b0!, b1!],
      }),
      portFor(nodeName, 'self', { clusterIP: '10.96.0.40', pods: [a2!] }),
    ];
    const node = topo.nodes.find((n) => n.name === nodeName)!;
    return {
      IPv4: proxyState('IPv4', ports, {
        nodeName,
        nodeIPs: [node.ipv4],
        localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
        serviceCIDRs: [SERVICE_CIDR_V4],
      }),
      IPv6: proxyState(
        'IPv6',
        [portFor(nodeName, 'web6', { clusterIP: 'fd00:96::10', nodePort: 30080, pods: [a0!, b0!] }, true)],
        {
          nodeName,
          nodeIPs: [node.ipv6],
          localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V6] },
          serviceCIDRs: ['fd00:96::/112'],
        },
      ),
    };
  }

  before(async () => {
    lab = new Lab('nftpkt');
    topo = await Topology.create(lab, { podsPerNode: [3, 2] });
    pod = (name) => topo.pod(name);
    for (const p of topo.nodes.flatMap((n) => n.pods)) await topo.startEcho(p, { tcp: [8080], udp: [5353] });
    // The client reaches service addresses through node-0.
    for (const cidr of [SERVICE_CIDR_V4, '192.168.6.0/24']) {
      await lab.addRoute(client(), [cidr, 'via', topo.nodes[0]!.ipv4]);
    }
    await lab.addRoute(client(), ['fd00:96::/64', 'via', topo.nodes[0]!.ipv6]);
    // ... except the eTP Local LB IP, sent to node-1, which has no local endpoint for it.
    await lab.addRoute(client(), [`${LOCAL_LB_IP}/32`, 'via', topo.nodes[1]!.ipv4]);
    for (const node of topo.nodes) {
      await nftLoad(lab, node.ns, nftablesPlanner.render(nftablesPlanner.planFull(stateFor(node.name))));
    }
  });
  after(() => lab?.destroy());

  test('TCP to a ClusterIP from outside reaches only its endpoints, on both nodes', async () => {
    const outcomes = await topo.connect(client(), 'tcp', '10.96.0.10', 80, { count: 40 });
    assert.deepEqual(names(outcomes), ['node-0-pod-0', 'node-1-pod-0']);
  });

  test('UDP to a ClusterIP reaches only its endpoints', async () => {
    const outcomes = await topo.connect(client(), 'udp', '10.96.0.53', 53, { count: 40 });
    assert.deepEqual(names(outcomes), ['node-0-pod-1', 'node-1-pod-0']);
  });

  test('UDP to a NodePort reaches only its endpoints', async () => {
    const outcomes = await topo.connect(client(), 'udp', topo.nodes[1]!.ipv4, 30053, { count: 30 });
    assert.deepEqual(names(outcomes), ['node-0-pod-1', 'node-1-pod-0']);
  });

  test('a pod reaches a ClusterIP through its node', async () => {
    // 30 connections miss one of 2 endpoints 2·2^-30 ~ 2e-9 of the time (20: 2e-6).
    const outcomes = await topo.connect(pod('node-0-pod-1').ns, 'tcp', '10.96.0.10', 80, { count: 30 });
    assert.deepEqual(names(outcomes), ['node-0-pod-0', 'node-1-pod-0']);
  });

  test('IPv6: a ClusterIP and a node port reach only their endpoints', async () => {
    assert.deepEqual(names(await topo.connect(client(), 'tcp', 'fd00:96::10', 80, { count: 30 })), [
      'node-0-pod-0',
      'node-1-pod-0',
    ]);
    assert.deepEqual(names(await topo.connect(client(), 'tcp', topo.nodes[1]!.ipv6, 30080, { count: 30 })), [
      'node-0-pod-0',
      'node-1-pod-0',
    ]);
  });

  test('a NodePort on either node reaches the endpoints on both', async () => {
    for (const node of topo.nodes) {
      const outcomes = await topo.connect(client(), 'tcp', node.ipv4, 30080, { count: 30 });
      assert.deepEqual(names(outcomes), ['node-0-pod-0', 'node-1-pod-0'], node.name);
    }
  });

  test('a service without endpoints is refused at once, not timed out', async () => {
    const outcomes = await topo.connect(client(), 'tcp', '10.96.0.99', 80, { timeoutMs: 3000 });
    assert.deepEqual(names(outcomes), ['error:ECONNREFUSED']);
    const viaNodePort = await topo.connect(client(), 'tcp', topo.nodes[1]!.ipv4, 30099, { timeoutMs: 3000 });
    assert.deepEqual(names(viaNodePort), ['error:ECONNREFUSED']);
    const fromPod = await topo.connect(pod('node-1-pod-1').ns, 'tcp', '10.96.0.99', 80, { timeoutMs: 3000 });
    assert.deepEqual(names(fromPod), ['error:ECONNREFUSED']);
  });

  test('a key missing from its counts map meets no DNAT: no count chain, no endpoint', async () => {
    // Only a damaged table lacks it (the dispatch and count elements go in one transaction).
    const node0 = topo.nodes[0]!.ns;
    await nftLoad(lab, node0, 'delete element ip kproxy backends-tcp-counts { 10.96.0.10 . 80 }\n');
    try {
      const outcomes = await topo.connect(client(), 'tcp', '10.96.0.10', 80, { count: 5, timeoutMs: 1500 });
      const reached = names(outcomes).filter((name) => !name.startsWith('error:'));
      assert.deepEqual(reached, [], 'no connection reached an endpoint');
    } finally {
      await nftLoad(lab, node0, 'add element ip kproxy backends-tcp-counts { 10.96.0.10 . 80 : 2 }\n');
    }
    assert.deepEqual(names(await topo.connect(client(), 'tcp', '10.96.0.10', 80, { count: 30 })), [
      'node-0-pod-0',
      'node-1-pod-0',
    ]);
  });

  test('externalTrafficPolicy Local keeps the client source; a node without local endpoints drops', async () => {
    const served = replies(await topo.connect(client(), 'tcp', topo.nodes[0]!.ipv4, 30020, { count: 5 }));
    assert.deepEqual(new Set(served.map((r) => r.name)), new Set(['node-0-pod-2']));
    for (const r of served) assert.equal(r.peer.split(':')[0], topo.client.ipv4);
    const dropped = await topo.connect(client(), 'tcp', topo.nodes[1]!.ipv4, 30020, { timeoutMs: 1500 });
    assert.deepEqual(names(dropped), ['error:timeout']);
  });

  test('a pod on a node without local endpoints still reaches an eTP Local node port (short-circuit)', async () => {
    const outcomes = await topo.connect(pod('node-1-pod-0').ns, 'tcp', topo.nodes[1]!.ipv4, 30020, {
      count: 3,
    });
    assert.deepEqual(names(outcomes), ['node-0-pod-2']);
  });

  test('the host itself reaches an eTP Local LB IP without local endpoints (short-circuit to the cluster)', async () => {
    const fromNode = await topo.connect(topo.nodes[1]!.ns, 'tcp', LOCAL_LB_IP, 80, { count: 3 });
    assert.deepEqual(names(fromNode), ['node-0-pod-2']);
    // Traffic from outside to the same node and address has no local endpoint: dropped.
    const fromOutside = await topo.connect(client(), 'tcp', LOCAL_LB_IP, 80, { timeoutMs: 1500 });
    assert.deepEqual(names(fromOutside), ['error:timeout']);
  });

  test('the host itself is refused by a service without endpoints', async () => {
    const outcomes = await topo.connect(topo.nodes[1]!.ns, 'tcp', '10.96.0.99', 80, { timeoutMs: 3000 });
    assert.deepEqual(names(outcomes), ['error:ECONNREFUSED']);
  });

  test('LoadBalancer source ranges: the client is let in by one service and dropped by another', async () => {
    assert.deepEqual(names(await topo.connect(client(), 'tcp', '192.168.6.6', 80, { count: 3 })), [
      'node-1-pod-1',
    ]);
    const denied = await topo.connect(client(), 'tcp', '192.168.6.7', 80, { timeoutMs: 1500 });
    assert.deepEqual(names(denied), ['error:timeout']);
  });

  // kube-proxy's TestLoadBalancer "node to LB (allowed by LoadBalancerSourceRanges)": the ranges
  // bind the node's own traffic too (filter-output jumps to firewall-check before nat-output DNATs).
  test("LoadBalancer source ranges: the node's own traffic is dropped outside them and let in inside", async () => {
    const node0 = topo.nodes[0]!.ns;
    const [denied, allowed] = await Promise.all([
      topo.connect(node0, 'tcp', '192.168.6.7', 80, { timeoutMs: 1500 }),
      topo.connect(node0, 'tcp', '192.168.6.9', 80, { count: 3 }),
    ]);
    assert.deepEqual(names(denied), ['error:timeout']);
    assert.deepEqual(names(allowed), ['node-1-pod-1']);
  });

  test('ClientIP affinity sends every connection of a client to one endpoint', async () => {
    const outcomes = await topo.connect(client(), 'tcp', '10.96.0.30', 80, { count: 30 });
    assert.equal(tally(outcomes).size, 1, JSON.stringify([...tally(outcomes)]));
    assert.ok(!names(outcomes)[0]!.startsWith('error'), names(outcomes)[0]);
  });

  test('hairpin: a pod reaches itself through its own service', async () => {
    const outcomes = await topo.connect(pod('node-0-pod-2').ns, 'tcp', '10.96.0.40', 80, { count: 3 });
    assert.deepEqual(names(outcomes), ['node-0-pod-2']);
  });

  // kube-proxy's cluster-ips-check (its proxier tests' "unallocated ClusterIP" and "ClusterIP on
  // an undefined port" flows): after DNAT, what still goes to a service address matched nothing.
  test('a ClusterIP on a port or protocol it does not serve is refused, from outside, a pod and the host', async () => {
    const refused = ['error:ECONNREFUSED'];
    const probe = (ns: string, proto: 'tcp', ip: string, port: number) =>
      topo.connect(ns, proto, ip, port, { timeoutMs: 3000 }).then(names);
    assert.deepEqual(await probe(client(), 'tcp', '10.96.0.10', 81), refused, 'port not served');
    // dns serves UDP/53 only. (UDP probes cannot tell: an unconnected socket hears no ICMP error.)
    assert.deepEqual(
      await probe(pod('node-1-pod-1').ns, 'tcp', '10.96.0.53', 53),
      refused,
      'protocol, from a pod',
    );
    assert.deepEqual(await probe(topo.nodes[1]!.ns, 'tcp', '10.96.0.10', 81), refused, 'from the host');
    assert.deepEqual(await probe(client(), 'tcp', 'fd00:96::10', 81), refused, 'IPv6');
    // The port it serves is still served, from the same places.
    assert.deepEqual(await probe(client(), 'tcp', '10.96.0.10', 80).then((n) => n.length), 1);
    // 30 connections miss one of 2 endpoints 2·2^-30 ~ 2e-9 of the time (10 missed one 1 run in 512).
    assert.deepEqual(names(await topo.connect(topo.nodes[1]!.ns, 'tcp', '10.96.0.10', 80, { count: 30 })), [
      'node-0-pod-0',
      'node-1-pod-0',
    ]);
  });

  test('an address of the service CIDR that no Service holds is dropped, not routed on', async () => {
    // Nodes route unknown addresses to the client (their default route), which routes service
    // addresses back to node-0: a packet routed on comes back to the client, and is counted there.
    await nftLoad(
      lab,
      client(),
      [
        'table inet probe {',
        '  chain routed-back {',
        '    type filter hook prerouting priority 0',
        '    ip daddr 10.96.0.77 counter',
        '    ip6 daddr fd00:96::77 counter',
        '    ip daddr 10.98.0.77 counter',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    await lab.addRoute(client(), ['10.98.0.0/16', 'via', topo.nodes[0]!.ipv4]);
    const routedBack = async (): Promise<number[]> => {
      const { stdout } = await lab.exec(client(), 'nft', ['-j', 'list', 'table', 'inet', 'probe']);
      const rules = (
        JSON.parse(stdout) as { nftables: { rule?: { expr: { counter?: { packets: number } }[] } }[] }
      ).nftables;
      return rules.flatMap((o) => o.rule?.expr.flatMap((e) => (e.counter ? [e.counter.packets] : [])) ?? []);
    };
    const probe = (ns: string, ip: string) =>
      topo.connect(ns, 'tcp', ip, 80, { timeoutMs: 1500 }).then(names);
    // Each drop is a silence waited out, so the probes wait together: each has its own address
    // and counter. The control: an address outside the service CIDRs is routed on, and counted.
    const [outside, fromPod, fromHost, ipv6] = await Promise.all([
      probe(client(), '10.96.0.77'),
      probe(pod('node-1-pod-1').ns, '10.96.0.77'),
      probe(topo.nodes[1]!.ns, '10.96.0.77'),
      probe(client(), 'fd00:96::77'),
      probe(client(), '10.98.0.77'),
    ]);
    assert.deepEqual(outside, ['error:timeout'], 'from outside');
    assert.deepEqual(fromPod, ['error:timeout'], 'from a pod');
    assert.deepEqual(fromHost, ['error:timeout'], 'from the host');
    assert.deepEqual(ipv6, ['error:timeout'], 'IPv6');
    const [v4, v6, control] = await routedBack();
    assert.deepEqual([v4, v6], [0, 0], 'no node routed a packet for an unallocated address on');
    assert.ok(control! > 0, 'the probe sees packets a node routes on');
  });
  // Incremental syncs keep each endpoint at its index (endpoint-slots.ts): departures' indexes get
  // the last endpoint, arrivals take the end. The numgen pick must still reach exactly the set.
  test('after endpoints come and go incrementally, every endpoint is reached and no removed one', async () => {
    const node = topo.nodes[0]!;
    const base = stateFor(node.name);
    const withChurn = (...podNames: string[]): DualStackState => {
      const churn = portFor(node.name, 'churn', { clusterIP: '10.96.0.50', pods: podNames.map(pod) });
      const ports = [...base.IPv4!.servicePorts.values(), churn];
      return { ...base, IPv4: { ...base.IPv4!, servicePorts: new Map(ports.map((sp) => [sp.key, sp])) } };
    };
    const slots = new Map<NftFamily, SlotRecord>();
    let prev = base;
    const step = async (next: DualStackState) => {
      const plan = runAll(incrementalPlanSteps(prev, next, { slots }));
      await nftLoad(lab, node.ns, nftablesPlanner.render(plan));
      plan.commit?.();
      prev = next;
    };
    const [a0, a1, a2, b0, b1] = [
      'node-0-pod-0',
      'node-0-pod-1',
      'node-0-pod-2',
      'node-1-pod-0',
      'node-1-pod-1',
    ];
    await step(withChurn(a0!, a1!, b0!));
    await step(withChurn(a0!, a1!, a2!, b0!, b1!));
    await step(withChurn(a2!, b0!, b1!)); // indexes 0 and 1 get the last two
    await step(withChurn(a0!, a2!, b0!, b1!)); // a0 comes back at index 3
    assert.ok(slots.get('ip')?.get('default/churn:80/TCP'), 'the numbering is not address order');
    const reached = [a0!, a2!, b0!, b1!].sort();
    // attemptsFor(4) = 61 connections miss one of 4 endpoints 4·(3/4)^61 ~ 1e-7 of the time.
    const outcomes = await topo.connect(client(), 'tcp', '10.96.0.50', 80, {
      count: attemptsFor(reached.length),
    });
    assert.deepEqual(names(outcomes), reached);
    await step(base);
  });
});
