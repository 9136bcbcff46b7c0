// Kernel test (issue 30): `kproxy run` in nftables mode with --nodeport-addresses primary,localhost
// in a lab node namespace serves the NodePort on 127.0.0.1 through its userspace forwarder (the
// kernel cannot DNAT loopback to a pod without route_localnet), as kube-proxy 1.37 (KEP-6032):
// real connections from the node to 127.0.0.1:<nodePort> reach a pod in its own namespace, while
// the node IP keeps the kernel's path; with no endpoint left the port refuses.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { requireRoot } from '../../harness/netns.ts';
import { replies, tally } from '../../harness/topology.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLEAN_EXIT,
  cluster,
  NODE_PORT,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  webService,
  webSlice,
} from './netns-cluster.ts';

/** Refused at once when nothing listens: a second bounds a loaded machine's answer. */
const REFUSED_TIMEOUT_MS = 1000;

describe('localhost node ports in nftables mode (kernel)', () => {
  test('127.0.0.1:<nodePort> reaches the pod through the forwarder, the node IP through the kernel; no endpoints: refused', async (t) => {
    if (!requireRoot(t)) return;
    const c = await cluster(t, 'nftables', [], 'nodePortAddresses:\n  - primary\n  - localhost\n');
    const node = c.topo.nodes[0]!;
    const [pod0, pod1] = node.pods;
    await c.write('POST', SERVICES, webService());
    await c.write('POST', ENDPOINT_SLICES, webSlice([pod1!.ipv4]));
    const daemon = c.startDaemon();
    await daemon.waitFor('rules synced', SYNC_DEADLINE_MS);

    await eventually('127.0.0.1 answers from the pod', async () =>
      (await backends(c, c.nodeNs, '127.0.0.1', NODE_PORT, 2)).has(pod1!.name),
    );
    // The pod sees the node's own address on its link, not loopback: the forwarder dialled it.
    const [seen] = replies(await c.topo.connect(c.nodeNs, 'tcp', '127.0.0.1', NODE_PORT));
    assert.equal(seen!.name, pod1!.name);
    assert.doesNotMatch(seen!.peer, /^127\./);
    // The node IP is the kernel's (nftables DNAT), as before.
    assert.deepEqual([...(await backends(c, c.nodeNs, node.ipv4, NODE_PORT, 4)).keys()], [pod1!.name]);
    assert.match(daemon.output(), /localhost node ports: TCP NodePorts relayed/);
    const metrics = await c.get('http://127.0.0.1:10249/metrics');
    assert.match(metrics.body, /^kubeproxy_nftables_localhost_nodeport_listeners\{ip_family="IPv4"\} 1$/m);

    // The endpoint moves: the forwarder follows; then none is left: nothing listens, refused.
    await c.write('PUT', ENDPOINT_SLICES, webSlice([pod0!.ipv4]));
    await eventually('127.0.0.1 follows the endpoint', async () =>
      (await backends(c, c.nodeNs, '127.0.0.1', NODE_PORT, 2)).has(pod0!.name),
    );
    await c.write('PUT', ENDPOINT_SLICES, webSlice([]));
    await eventually('127.0.0.1 refuses without endpoints', async () => {
      const outcomes = await c.topo.connect(c.nodeNs, 'tcp', '127.0.0.1', NODE_PORT, {
        timeoutMs: REFUSED_TIMEOUT_MS,
      });
      return tally(outcomes).has('error:ECONNREFUSED');
    });
    assert.deepEqual(await daemon.stop(STOP_DEADLINE_MS), CLEAN_EXIT, daemon.output());
  });
});
