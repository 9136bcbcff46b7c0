// Kernel test: kproxy's iptables rules on node-0 of a namespace cluster, checked with real TCP and
// UDP packets from an outside client and from a pod. Runs once per iptables backend.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { DualStackState, Endpoint, ServicePort } from '../../../contract/proxy-state.ts';
import { IptablesDataplane } from '../../../dataplanes/iptables/live.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { openNfacctCountersIn, scrapedNfacctMetric } from '../../../harness/nfacct-counters.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4, CLUSTER_CIDR_V6, replies, Topology, tally } from '../../../harness/topology.ts';

const isRoot = process.getuid?.() === 0;
const SKIP_REASON = 'needs root: network namespaces and iptables (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED iptables traffic tests: ${SKIP_REASON}\n`);

/**
 * A LoadBalancer IP the client holds too, as the load balancer in front of the nodes would: a
 * node's packet for it that no rule DNATs or drops leaves by the default route and is answered.
 */
const OUTSIDE_LB_IP = '192.0.2.53';

function endpointsOf(topology: Topology, nodeIndexes: readonly number[], port: number): Endpoint[] {
  return nodeIndexes.flatMap((i) =>
    topology.nodes[i]!.pods.map((pod) => endpoint(pod.ipv4, port, { isLocal: i === 0 })),
  );
}

function clusterState(topology: Topology): DualStackState {
  const all = endpointsOf(topology, [0, 1], 8080);
  const local = all.filter((e) => e.isLocal);
  const dns = endpointsOf(topology, [0, 1], 5353);
  const ports: ServicePort[] = [
    servicePort('web', { namespace: 'ns', clusterIP: '10.96.0.10', nodePort: 30080, clusterEndpoints: all }),
    servicePort('dns', {
      namespace: 'ns',
      clusterIP: '10.96.0.53',
      port: 53,
      protocol: 'UDP',
      clusterEndpoints: dns,
    }),
    servicePort('empty', { namespace: 'ns', clusterIP: '10.96.0.70', nodePort: 30070, hasEndpoints: false }),
    servicePort('local', {
      namespace: 'ns',
      clusterIP: '10.96.0.30',
      nodePort: 30081,
      externalPolicyLocal: true,
      clusterEndpoints: all,
      localEndpoints: local,
    }),
    servicePort('sticky', {
      namespace: 'ns',
      clusterIP: '10.96.0.60',
      sessionAffinity: { timeoutSeconds: 600 },
      clusterEndpoints: all,
    }),
    servicePort('lb-open', {
      namespace: 'ns',
      clusterIP: '10.96.0.50',
      loadBalancerIPs: ['192.0.2.51'],
      loadBalancerSourceRanges: ['10.100.0.0/24'],
      clusterEndpoints: all,
    }),
    servicePort('lb-closed', {
      namespace: 'ns',
      clusterIP: '10.96.0.52',
      loadBalancerIPs: ['192.0.2.52'],
      loadBalancerSourceRanges: ['198.51.100.0/24'],
      clusterEndpoints: all,
    }),
    // Held by the client too (OUTSIDE_LB_IP): what the firewall lets leave un-DNATed is answered.
    servicePort('lb-held-outside', {
      namespace: 'ns',
      clusterIP: '10.96.0.54',
      loadBalancerIPs: [OUTSIDE_LB_IP],
      loadBalancerSourceRanges: ['198.51.100.0/24'],
      clusterEndpoints: all,
    }),
  ];
  const all6 = topology.nodes.flatMap((node, i) =>
    node.pods.map((pod) => endpoint(pod.ipv6, 8080, { isLocal: i === 0 })),
  );
  return {
    IPv6: proxyState(
      'IPv6',
      [
        servicePort('web', {
          namespace: 'ns',
          clusterIP: 'fd00:96::10',
          nodePort: 30080,
          clusterEndpoints: all6,
        }),
      ],
      {
        nodeIPs: [topology.nodes[0]!.ipv6],
        localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V6] },
      },
    ),
    IPv4: proxyState('IPv4', ports, {
      nodeIPs: [topology.nodes[0]!.ipv4],
      localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
    }),
  };
}

/** applyRouteLocalnet as `kproxy run` calls it in iptables mode with kube-proxy's defaults. */
const ROUTE_LOCALNET_AT_START = `
  import { applyRouteLocalnet } from ${JSON.stringify(fileURLToPath(new URL('../../../src/daemon/route-localnet.ts', import.meta.url)))};
  const options = ${JSON.stringify({ nodeName: 'node-0', nodeIPs: [], detectLocalMode: 'None', clusterCIDRs: [], masqueradeAll: false, masqueradeBit: 14, nodePortAddresses: [], localhostNodePorts: true })};
  console.log(JSON.stringify(await applyRouteLocalnet(options, '/proc')));
`;

for (const backend of ['nft', 'legacy'] as const) {
  describe(`iptables-${backend} rules carry real traffic`, {
    skip: !isRoot && 'needs root: network namespaces and iptables (run the suite as root)',
  }, () => {
    let lab: Lab;
    let topology: Topology;
    let dataplane: IptablesDataplane;
    let client: string;
    let node0IP: string;

    before(async () => {
      lab = new Lab(`ipt-traffic-${backend}`);
      topology = await Topology.create(lab, { podsPerNode: [2, 1] });
      client = topology.client.ns;
      node0IP = topology.nodes[0]!.ipv4;
      for (const pod of topology.nodes.flatMap((n) => n.pods)) {
        await topology.startEcho(pod, { tcp: [8080], udp: [5353] });
      }
      // The client reaches service and LB addresses through node-0, as through a router.
      for (const range of ['10.96.0.0/16', '192.0.2.0/24'])
        await lab.addRoute(client, [range, 'via', node0IP]);
      await lab.addRoute(client, ['fd00:96::/64', 'via', topology.nodes[0]!.ipv6]);
      await lab.addAddress(client, 'lo', `${OUTSIDE_LB_IP}/32`);
      await topology.startEcho(
        { ...topology.nodes[0]!.pods[0]!, name: 'outside-lb', ns: client },
        { tcp: [80] },
      );
      // Like a node's default route: a VIP without endpoints must be routable to reach the REJECT.
      await lab.addRoute(topology.nodes[0]!.ns, ['10.96.0.0/16', 'dev', 'eth0']);
      dataplane = new IptablesDataplane({
        runner: execaRunner(['ip', 'netns', 'exec', topology.nodes[0]!.ns]),
        backend,
      });
      await dataplane.start();
      const outcome = await dataplane.sync(clusterState(topology), 'full');
      assert.equal(outcome.kind, 'full');
    });

    after(async () => {
      await lab?.destroy();
    });

    test('ClusterIP spreads TCP connections over every endpoint', async (t) => {
      if (!requireRoot(t)) return;
      const counts = tally(await topology.connect(client, 'tcp', '10.96.0.10', 80, { count: 40 }));
      assert.deepEqual(
        [...counts.keys()],
        ['node-0-pod-0', 'node-0-pod-1', 'node-1-pod-0'],
        String([...counts]),
      );
    });

    test('IPv6 ClusterIP and NodePort carry traffic through ip6tables', async (t) => {
      if (!requireRoot(t)) return;
      // 45 connections miss one of 3 endpoints 3·(2/3)^45 ~ 4e-8 of the time (30: 2e-5).
      const viaService = tally(await topology.connect(client, 'tcp', 'fd00:96::10', 80, { count: 45 }));
      assert.deepEqual(
        [...viaService.keys()],
        ['node-0-pod-0', 'node-0-pod-1', 'node-1-pod-0'],
        String([...viaService]),
      );
      const viaNodePort = replies(
        await topology.connect(client, 'tcp', topology.nodes[0]!.ipv6, 30080, { count: 5 }),
      );
      assert.equal(viaNodePort.length, 5);
    });

    test('ClusterIP carries UDP', async (t) => {
      if (!requireRoot(t)) return;
      const outcomes = await topology.connect(client, 'udp', '10.96.0.53', 53, { count: 5 });
      assert.equal(replies(outcomes).length, 5);
    });

    test('a pod reaches a service, including itself (hairpin)', async (t) => {
      if (!requireRoot(t)) return;
      const pod = topology.pod('node-0-pod-0');
      // 45 connections all miss itself, of 3 endpoints, (2/3)^45 ~ 1e-8 of the time (30: 5e-6).
      const counts = tally(await topology.connect(pod.ns, 'tcp', '10.96.0.10', 80, { count: 45 }));
      assert.ok(counts.get('node-0-pod-0'), `hairpin connection answered: ${[...counts]}`);
      assert.equal([...counts.keys()].filter((k) => k.startsWith('error')).length, 0, String([...counts]));
    });

    test('NodePort with Cluster policy reaches every endpoint, masqueraded', async (t) => {
      if (!requireRoot(t)) return;
      // 45 connections miss one of 3 endpoints 3·(2/3)^45 ~ 4e-8 of the time (30: 2e-5).
      const answers = replies(await topology.connect(client, 'tcp', node0IP, 30080, { count: 45 }));
      assert.equal(new Set(answers.map((a) => a.name)).size, 3);
      const remote = answers.find((a) => a.name === 'node-1-pod-0')!;
      assert.equal(remote.peer.split(':')[0], node0IP, 'traffic to another node is masqueraded');
    });

    test('externalTrafficPolicy Local keeps the client source and uses only local endpoints', async (t) => {
      if (!requireRoot(t)) return;
      // 30 connections miss one of 2 local endpoints 2·2^-30 ~ 2e-9 of the time (20: 2e-6).
      const answers = replies(await topology.connect(client, 'tcp', node0IP, 30081, { count: 30 }));
      assert.deepEqual([...new Set(answers.map((a) => a.name))].sort(), ['node-0-pod-0', 'node-0-pod-1']);
      for (const a of answers) assert.equal(a.peer.split(':')[0], topology.client.ipv4);
    });

    test('a service without endpoints rejects connections', async (t) => {
      if (!requireRoot(t)) return;
      // From the node itself: the ICMP answer stays on this host. (From the remote client the first
      // ICMP errors are sometimes lost to the kernel's rate limits, which would make this flaky.)
      const node = topology.nodes[0]!.ns;
      assert.deepEqual(
        [...tally(await topology.connect(node, 'tcp', '10.96.0.70', 80))],
        [['error:ECONNREFUSED', 1]],
      );
      assert.deepEqual(
        [...tally(await topology.connect(node, 'tcp', node0IP, 30070))],
        [['error:ECONNREFUSED', 1]],
      );
    });

    test('ClientIP affinity sends every connection of a client to one endpoint', async (t) => {
      if (!requireRoot(t)) return;
      const counts = tally(await topology.connect(client, 'tcp', '10.96.0.60', 80, { count: 15 }));
      assert.equal(counts.size, 1, String([...counts]));
      assert.ok(![...counts.keys()][0]!.startsWith('error'), String([...counts]));
    });

    test('LoadBalancer source ranges admit listed clients and drop the others', async (t) => {
      if (!requireRoot(t)) return;
      assert.equal(replies(await topology.connect(client, 'tcp', '192.0.2.51', 80, { count: 3 })).length, 3);
      const closed = tally(await topology.connect(client, 'tcp', '192.0.2.52', 80, { timeoutMs: 500 }));
      assert.deepEqual([...closed], [['error:timeout', 1]]);
    });

    // kube-proxy's TestLoadBalancer: the node's own traffic is bound by the ranges too (filter
    // OUTPUT jumps to the firewall chain); lb-open's range holds node-0's IP.
    test("LoadBalancer source ranges bind the node's own traffic: let in inside them, dropped outside", async (t) => {
      if (!requireRoot(t)) return;
      const node0 = topology.nodes[0]!.ns;
      const [open, closed] = await Promise.all([
        topology.connect(node0, 'tcp', '192.0.2.51', 80, { count: 3 }),
        topology.connect(node0, 'tcp', OUTSIDE_LB_IP, 80, { timeoutMs: 500 }),
      ]);
      const pods = new Set(topology.nodes.flatMap((n) => n.pods.map((p) => p.name)));
      assert.ok(
        replies(open).every((r) => pods.has(r.name)),
        JSON.stringify(open),
      );
      assert.deepEqual([...tally(closed)], [['error:timeout', 1]]);
    });

    test('an incremental sync moves traffic to the new endpoint set', async (t) => {
      if (!requireRoot(t)) return;
      const state = clusterState(topology);
      const web = state.IPv4!.servicePorts.get('ns/web:80/TCP')!;
      const onlyRemote = web.clusterEndpoints.filter((e) => !e.isLocal);
      const next = {
        ...state,
        IPv4: proxyState(
          'IPv4',
          [...state.IPv4!.servicePorts.values()]
            .filter((sp) => sp !== web)
            .concat({
              ...web,
              clusterEndpoints: onlyRemote,
            }),
          state.IPv4!.node,
        ),
      };
      assert.equal((await dataplane.sync(next, 'incremental')).kind, 'incremental');
      const counts = tally(await topology.connect(client, 'tcp', '10.96.0.10', 80, { count: 10 }));
      assert.deepEqual([...counts], [['node-1-pod-0', 10]]);
      await dataplane.sync(state, 'incremental');
    });

    test("a removed UDP endpoint's conntrack entries are deleted by the sync", async (t) => {
      if (!requireRoot(t)) return;
      const node = topology.nodes[0]!.ns;
      const gone = topology.pod('node-0-pod-0').ipv4;
      const flows = async (): Promise<number> => {
        const args = ['-L', '-p', 'udp', '--orig-dst', '10.96.0.53', '--reply-src', gone];
        const listed = await lab.exec(node, 'conntrack', args, { reject: false });
        return listed.stdout.split('\n').filter((line) => line.includes('udp')).length;
      };
      // Each datagram comes from a new source port and picks one of the 3 endpoints: 60 miss this
      // one (2/3)^60 ~ 3e-11 of the time (20 missed it 3e-4).
      await topology.connect(client, 'udp', '10.96.0.53', 53, { count: 60 });
      assert.ok((await flows()) > 0, 'flows to the endpoint are tracked');
      const state = clusterState(topology);
      const dns = state.IPv4!.servicePorts.get('ns/dns:53/UDP')!;
      const others = [...state.IPv4!.servicePorts.values()].filter((sp) => sp !== dns);
      const withoutEndpoint = {
        ...state,
        IPv4: proxyState(
          'IPv4',
          [...others, { ...dns, clusterEndpoints: dns.clusterEndpoints.filter((e) => e.ip !== gone) }],
          state.IPv4!.node,
        ),
      };
      const outcome = await dataplane.sync(withoutEndpoint, 'incremental');
      assert.ok((outcome.conntrack[0]?.deleted ?? 0) >= 1, JSON.stringify(outcome));
      assert.equal(await flows(), 0);
      await dataplane.sync(state, 'incremental');
    });

    test('localhost NodePorts: 127.0.0.1 on the node reaches every endpoint, masqueraded, with the option on (and route_localnet) only; each connection counted in the metric', async (t) => {
      if (!requireRoot(t)) return;
      const node = topology.nodes[0]!.ns;
      const state = clusterState(topology);
      const v4 = state.IPv4!;
      const counted = { ...v4.node, localhostNodePorts: true, localhostNodePortsCounted: true };
      const served = { ...state, IPv4: { ...v4, node: counted } };
      const scraped = async () => {
        const sample = /^kubeproxy_iptables_localhost_nodeports_accepted_packets_total (\d+)$/m.exec(
          await scrapedNfacctMetric(lab, node, 'LOCALHOST_NODEPORT_PACKETS'),
        );
        assert.ok(sample, 'the metric is served');
        return Number(sample[1]);
      };
      const viaLocalhost = (options: { count?: number; timeoutMs?: number } = {}) =>
        topology.connect(node, 'tcp', '127.0.0.1', 30080, options);
      // Off (as in nftables mode): 127.0.0.0/8 is not a node port address, nothing listens there.
      assert.deepEqual([...tally(await viaLocalhost()).keys()], ['error:ECONNREFUSED']);

      // The rule needs the counter (iptables-restore refuses an nfacct match without it).
      assert.deepEqual(await openNfacctCountersIn(lab, node, ['LOCALHOST_NODEPORT_PACKETS']), [{ ok: true }]);
      assert.equal((await dataplane.sync(served, 'incremental')).kind, 'incremental');
      // Without route_localnet the kernel will not route a 127.0.0.1 source off the node: no
      // answer (1 s calls a silence a drop; the SYN never leaves).
      const unrouted = await viaLocalhost({ timeoutMs: 1000 });
      assert.ok(
        unrouted.every((o) => 'error' in o),
        JSON.stringify(unrouted),
      );
      // kproxy run's start-up step, run in the node's namespace on its real /proc.
      const set = await lab.exec(node, process.execPath, [
        '--input-type=module',
        '-e',
        ROUTE_LOCALNET_AT_START,
      ]);
      assert.deepEqual(JSON.parse(set.stdout), [
        { key: 'net.ipv4.conf.all.route_localnet', action: 'set', from: 0, to: 1 },
      ]);
      try {
        const before = await scraped();
        // 45 connections miss one of 3 endpoints 3·(2/3)^45 ~ 4e-8 of the time (30: 2e-5).
        const answers = replies(await viaLocalhost({ count: 45 }));
        // The nat table sees a connection's first packet only: one count per connection.
        assert.equal((await scraped()) - before, 45);
        assert.deepEqual([...new Set(answers.map((a) => a.name))].sort(), [
          'node-0-pod-0',
          'node-0-pod-1',
          'node-1-pod-0',
        ]);
        for (const a of answers) assert.notEqual(a.peer.split(':')[0], '127.0.0.1', 'masqueraded');
        const remote = answers.find((a) => a.name === 'node-1-pod-0')!;
        assert.equal(remote.peer.split(':')[0], node0IP, 'another node sees the node IP');
      } finally {
        await lab.sysctl(node, 'net.ipv4.conf.all.route_localnet', '0');
        await dataplane.sync(state, 'incremental');
      }
    });

    test("INVALID packets forwarded by the node are dropped and counted in kube-proxy's nfacct object, its metric served", async (t) => {
      if (!requireRoot(t)) return;
      const node = topology.nodes[0]!.ns;
      const state = clusterState(topology);
      const v4 = state.IPv4!;
      const counting = { ...state, IPv4: { ...v4, node: { ...v4.node, invalidDropsCounted: true } } };
      const scraped = async () => {
        const sample = /^kubeproxy_iptables_ct_state_invalid_dropped_packets_total (\d+)$/m.exec(
          await scrapedNfacctMetric(lab, node, 'INVALID_DROPPED_PACKETS'),
        );
        assert.ok(sample, 'the metric is served');
        return Number(sample[1]);
      };
      // The rule needs the counter (iptables-restore refuses an nfacct match without it).
      assert.deepEqual(await openNfacctCountersIn(lab, node, ['INVALID_DROPPED_PACKETS']), [{ ok: true }]);
      assert.equal((await dataplane.sync(counting, 'incremental')).kind, 'incremental');
      // A strict conntrack takes a mid-stream segment it has no entry for as INVALID (a loose one
      // would pick the connection up): forgetting a live connection forwarded by node-0 turns its
      // next segments INVALID there.
      await lab.sysctl(node, 'net.netfilter.nf_conntrack_tcp_loose', '0');
      const held = await topology.holdConnection(
        topology.nodes[1]!.ns,
        topology.pod('node-0-pod-0').ipv4,
        8080,
      );
      try {
        const before = await scraped();
        await held.waitFor('tick');
        await lab.exec(node, 'conntrack', ['-F']);
        // The held connection sends a segment every 100 ms: the deadline only bounds a hang.
        const deadline = Date.now() + 30_000;
        let after = before;
        while (after === before && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
          after = await scraped();
        }
        assert.ok(after > before, `dropped INVALID packets counted: ${before} -> ${after}`);
      } finally {
        await held.kill();
        await lab.sysctl(node, 'net.netfilter.nf_conntrack_tcp_loose', '1');
        await dataplane.sync(state, 'incremental');
      }
    });

    test('a flushed nat table is detected and repaired by the next sync', async (t) => {
      if (!requireRoot(t)) return;
      const node = topology.nodes[0]!.ns;
      await lab.exec(node, `iptables-${backend}`, ['-w', '-t', 'nat', '-F']);
      await lab.exec(node, `iptables-${backend}`, ['-w', '-t', 'nat', '-X']);
      assert.equal(await dataplane.intact(), false);
      const outcome = await dataplane.sync(clusterState(topology), 'incremental');
      assert.equal(outcome.kind, 'full', 'the canary forces a full sync');
      assert.equal(await dataplane.intact(), true);
      assert.equal(replies(await topology.connect(client, 'tcp', '10.96.0.10', 80, { count: 3 })).length, 3);
    });

    test('cleanup removes every KPROXY chain and jump and nothing else', async (t) => {
      if (!requireRoot(t)) return;
      const node = topology.nodes[0]!.ns;
      await lab.exec(node, `iptables-${backend}`, [
        '-w',
        '-t',
        'nat',
        '-A',
        'OUTPUT',
        '-d',
        '203.0.113.9',
        '-j',
        'ACCEPT',
      ]);
      await dataplane.cleanup();
      const saved = (await lab.exec(node, `iptables-${backend}-save`, [])).stdout;
      assert.doesNotMatch(saved, /KPROXY/);
      assert.match(saved, /-A OUTPUT -d 203\.0\.113\.9\/32 -j ACCEPT/, 'foreign rules stay');
    });
  });
}
