// Kernel test (issue 29): `kproxy run` in one mode, stopped, then in another in the same node
// namespace: the new mode's first full sync takes effect before the old mode's rules go, and then
// they go; a client opening STEADY_PER_SECOND new connections a second to the ClusterIP (from the
// node: output hooks) and to the NodePort (from outside: prerouting) sees none fail from before the
// first run until after the cleanup, and the node holds only the new mode's rules. Every ordered
// pair of the modes this kernel runs (IPVS only in the VM, whose emulation is too slow for the rate).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { requireRoot } from '../../harness/netns.ts';
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

const modes = modesHere().filter((mode) => mode !== 'ipvs');
for (const from of modes) {
  for (const to of modes.filter((mode) => mode !== from)) {
    describe(`kproxy run switched from ${from} to ${to}`, () => {
      test('no new connection fails, and only the new mode’s rules stay', async (t) => {
        if (!requireRoot(t)) return;
        const c = await cluster(t, from);
        const pods = c.topo.nodes[0]!.pods;
        const nodeIp = c.topo.nodes[0]!.ipv4;
        await c.write('POST', SERVICES, webService());
        await c.write('POST', ENDPOINT_SLICES, webSlice(pods.map((pod) => pod.ipv4)));
        const first = c.startDaemon();
        await first.waitFor(SYNCED_LOG, SYNC_DEADLINE_MS);
        await eventually(
          'the NodePort answers',
          async () => (await backends(c, c.topo.client.ns, nodeIp, NODE_PORT, 2)).size > 0,
        );

        const client = steadyClient(c, [
          { fromNs: c.nodeNs, proto: 'tcp', host: CLUSTER_IP, port: 80 },
          { fromNs: c.topo.client.ns, proto: 'tcp', host: nodeIp, port: NODE_PORT },
        ]);
        t.after(() => client.stop());
        assert.deepEqual(await first.stop(STOP_DEADLINE_MS), CLEAN_EXIT, first.output());
        const second = c.startDaemon(to);
        await second.waitFor(REMOVED_LOG, SYNC_DEADLINE_MS);
        // Traffic goes on past the cleanup: what the removal left must serve it.
        const afterCleanup = client.started() + 25;
        await eventually('25 more attempts after the cleanup', async () => client.started() >= afterCleanup);
        const [clusterIp, nodePort] = await client.stop();

        assert.deepEqual(failures(clusterIp!), [], 'ClusterIP from the node');
        assert.deepEqual(failures(nodePort!), [], 'NodePort from outside');
        assert.ok(clusterIp!.length >= 25, `only ${clusterIp!.length} attempts`);
        assert.equal(await ownRules(c, from), '', `${from}'s rules are gone`);
        assert.notEqual(await ownRules(c, to), '', `${to}'s rules serve`);
        assert.deepEqual(await second.stop(STOP_DEADLINE_MS), CLEAN_EXIT, second.output());
      });
    });
  }
}
