// Kernel test (issue 29): `kproxy run` in one mode, stopped, then in another in the same node
// namespace: the new mode's first full sync takes effect before the old mode's rules go, and then
// they go; a client opening STEADY_PER_SECOND new connections a second to a TCP ClusterIP and a UDP
// ClusterIP (from the node: output hooks), and to a NodePort with externalTrafficPolicy Cluster and
// one with Local (from outside: prerouting) sees none fail from before the first run until after the
// cleanup, the Local one answered by its local endpoint alone, unmasqueraded; a TCP connection held
// to the ClusterIP and to the Local NodePort, and a UDP flow held to the UDP ClusterIP (two endpoints
// each but the Local one), answer from the same backend after; and the node holds only the new
// mode's rules. Every ordered pair of the modes this kernel runs (IPVS only in the VM, whose
// emulation is too slow for the rate).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../harness/apiserver/sample-objects.ts';
import type { EchoOutcome } from '../../harness/echo-client.ts';
import type { EchoReply } from '../../harness/echo-server.ts';
import { type LabProcess, requireRoot } from '../../harness/netns.ts';
import { modesHere } from '../../harness/vm.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLEAN_EXIT,
  CLUSTER_IP,
  cluster,
  failures,
  NODE_PORT,
  ownRules,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  steadyClient,
  webService,
  webSlice,
} from './netns-cluster.ts';

// Log lines by their message alone: the same in the JSON and the text log format.
const SYNCED_LOG = 'rules synced';
const REMOVED_LOG = 'removed what an earlier run in another mode left';

const LOCAL_NODE_PORT = 30081;
const DNS_CLUSTER_IP = '10.96.0.11';
const DNS_PORT = 53;
/** The pod the Local NodePort's slice puts on this node: the only one that may answer it. */
const LOCAL_POD = 'node-0-pod-1';

type Spec = { type: string; externalTrafficPolicy?: string; ports: Record<string, unknown>[] };

/** local: a NodePort with externalTrafficPolicy Local, port 80 → 8080. */
function localService() {
  const service = sampleService('default', 'local', { clusterIP: '10.96.0.12' });
  const spec = service.spec as Spec;
  spec.type = 'NodePort';
  spec.externalTrafficPolicy = 'Local';
  spec.ports[0]!.nodePort = LOCAL_NODE_PORT;
  return service;
}

/** Both pods, the first said to run on another node: the Local NodePort may use the second only. */
function localSlice(addresses: readonly string[]) {
  const slice = sampleEndpointSlice('default', 'local-abc', {
    service: 'local',
    addresses,
    nodeName: 'node-0',
  });
  (slice.endpoints as { nodeName: string }[])[0]!.nodeName = 'node-1';
  return slice;
}

/** dns: a UDP ClusterIP, port 53 → 8080. */
function dnsService() {
  const service = sampleService('default', 'dns', { clusterIP: DNS_CLUSTER_IP, port: DNS_PORT });
  (service.spec as Spec).ports[0]!.protocol = 'UDP';
  return service;
}

function dnsSlice(addresses: readonly string[]) {
  const slice = sampleEndpointSlice('default', 'dns-abc', { service: 'dns', addresses, nodeName: 'node-0' });
  (slice.ports as Record<string, unknown>[])[0]!.protocol = 'UDP';
  return slice;
}

/** Answers to the Local NodePort from another pod than LOCAL_POD, or that did not see the client. */
function notLocal(outcomes: readonly EchoOutcome[], clientIP: string): string[] {
  return outcomes
    .filter((o) => 'name' in o && (o.name !== LOCAL_POD || !o.peer.startsWith(`${clientIP}:`)))
    .map((o) => JSON.stringify(o));
}

/** A held connection or flow: its whole lines so far, and the backends that answered them. */
function heldLines(proc: LabProcess) {
  const lines = proc.output().split('\n').slice(0, -1);
  const replies = lines.map((line) => JSON.parse(line) as EchoReply | { echo: string } | { error: string });
  const names = new Set(replies.flatMap((reply) => ('name' in reply ? [reply.name] : [])));
  return { lines, names };
}

const modes = modesHere().filter((mode) => mode !== 'ipvs');
for (const from of modes) {
  for (const to of modes.filter((mode) => mode !== from)) {
    describe(`kproxy run switched from ${from} to ${to}`, () => {
      test('no new connection fails, held ones keep their backend, and only the new mode’s rules stay', async (t) => {
        if (!requireRoot(t)) return;
        const c = await cluster(t, from);
        const pods = c.topo.nodes[0]!.pods.map((pod) => pod.ipv4);
        const nodeIp = c.topo.nodes[0]!.ipv4;
        const clientIp = c.topo.client.ipv4;
        await c.write('POST', SERVICES, webService());
        await c.write('POST', ENDPOINT_SLICES, webSlice(pods));
        await c.write('POST', SERVICES, localService());
        await c.write('POST', ENDPOINT_SLICES, localSlice(pods));
        await c.write('POST', SERVICES, dnsService());
        await c.write('POST', ENDPOINT_SLICES, dnsSlice(pods));
        const first = c.startDaemon();
        await first.waitFor(SYNCED_LOG, SYNC_DEADLINE_MS);
        await eventually(
          'the NodePorts and the UDP ClusterIP answer',
          async () =>
            (await backends(c, c.topo.client.ns, nodeIp, NODE_PORT, 2)).size > 0 &&
            (await backends(c, c.topo.client.ns, nodeIp, LOCAL_NODE_PORT, 2)).size > 0 &&
            (await c.topo.connect(c.nodeNs, 'udp', DNS_CLUSTER_IP, DNS_PORT)).every((o) => 'name' in o),
        );
        const held = {
          clusterIp: await c.topo.holdConnection(c.nodeNs, CLUSTER_IP, 80),
          localNodePort: await c.topo.holdConnection(c.topo.client.ns, nodeIp, LOCAL_NODE_PORT),
          udpFlow: await c.topo.holdConnection(c.nodeNs, DNS_CLUSTER_IP, DNS_PORT, 'udp'),
        };
        assert.deepEqual(heldLines(held.localNodePort).names, new Set([LOCAL_POD]));

        const client = steadyClient(c, [
          { fromNs: c.nodeNs, proto: 'tcp', host: CLUSTER_IP, port: 80 },
          { fromNs: c.topo.client.ns, proto: 'tcp', host: nodeIp, port: NODE_PORT },
          { fromNs: c.topo.client.ns, proto: 'tcp', host: nodeIp, port: LOCAL_NODE_PORT },
          { fromNs: c.nodeNs, proto: 'udp', host: DNS_CLUSTER_IP, port: DNS_PORT },
        ]);
        t.after(() => client.stop());
        assert.deepEqual(await first.stop(STOP_DEADLINE_MS), CLEAN_EXIT, first.output());
        const second = c.startDaemon(to);
        await second.waitFor(REMOVED_LOG, SYNC_DEADLINE_MS);
        const heldAtCleanup = Object.values(held).map((proc) => heldLines(proc).lines.length);
        // Traffic goes on past the cleanup: what the removal left must serve it.
        const afterCleanup = client.started() + 25;
        await eventually('25 more attempts after the cleanup', async () => client.started() >= afterCleanup);
        const [clusterIp, nodePort, localNodePort, udp] = await client.stop();

        assert.deepEqual(failures(clusterIp!), [], 'ClusterIP from the node');
        assert.deepEqual(failures(nodePort!), [], 'NodePort from outside');
        assert.deepEqual(failures(localNodePort!), [], 'Local NodePort from outside');
        assert.deepEqual(
          notLocal(localNodePort!, clientIp),
          [],
          'Local NodePort: its local endpoint, unmasqueraded',
        );
        assert.deepEqual(failures(udp!), [], 'UDP ClusterIP from the node');
        assert.ok(clusterIp!.length >= 25, `only ${clusterIp!.length} attempts`);
        for (const [i, [name, proc]] of Object.entries(held).entries()) {
          const { lines, names } = heldLines(proc);
          assert.ok(lines.length > heldAtCleanup[i]!, `${name} answers after the cleanup`);
          assert.doesNotMatch(proc.output(), /error/, `${name} holds`);
          assert.equal(names.size, 1, `${name}: one backend throughout, not ${[...names]}`);
        }
        assert.equal(await ownRules(c, from), '', `${from}'s rules are gone`);
        assert.notEqual(await ownRules(c, to), '', `${to}'s rules serve`);
        assert.deepEqual(await second.stop(STOP_DEADLINE_MS), CLEAN_EXIT, second.output());
      });
    });
  }
}
