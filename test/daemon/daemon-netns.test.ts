// The daemon end to end, on the real kernel: `kproxy run` as a process INSIDE a lab node
// namespace, talking to the stand-in API server (a process on that namespace's loopback), with
// pods running echo servers. Services change through the API → rules follow → real connections
// follow; health and metrics are scraped; a restart under traffic keeps established connections;
// an API server outage keeps the rules, turns /healthz 503, and recovery resyncs (not in IPVS:
// the test says why).
// Runs for every mode this build can program: here for those this kernel runs, and this same file
// inside the qemu VM (test/in-vm.test.ts) for the others (IPVS, on a kernel without ip_vs).
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { requireRoot } from '../../harness/netns.ts';
import { tally } from '../../harness/topology.ts';
import { modesHere } from '../../harness/vm.ts';
import { heldConnection } from '../../lab/echo-output.ts';
import { BACKOFF_MAX_MS } from '../../src/kube/backoff.ts';
import { ENDPOINT_SLICES, SERVICE_CIDRS, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLEAN_EXIT,
  CLUSTER_IP,
  type Cluster,
  cluster,
  KPROXY,
  NODE_BIN,
  NODE_PORT,
  ownRules,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  syncCount,
  webService,
  webSlice,
} from './netns-cluster.ts';

const HEALTH_CHECK_PORT = 32000;

const isRoot = process.getuid?.() === 0;

for (const mode of modesHere()) {
  describe(`kproxy run end to end (${mode})`, () => {
    // One node, API server and pair of echo pods for this mode's tests (node processes start slowly,
    // 11-23 s each in the VM: a cluster starts three, its probers two more). Each test starts its
    // own daemons and web; the node keeps the rules its last daemon left, as across any restart,
    // and the next daemon's first sync is a full one that replaces them.
    const cleanups: (() => Promise<void>)[] = [];
    let c: Cluster;
    before(async () => {
      if (isRoot) c = await cluster({ after: (fn) => cleanups.unshift(fn) }, mode);
    });
    after(async () => {
      for (const cleanup of cleanups) await cleanup();
    });
    // Also after a failure, so that it fails no other test (404 when the test deleted it itself).
    afterEach(async () => {
      if (!isRoot) return;
      await c.write('DELETE', SERVICES, webService()).catch(() => {});
      await c.write('DELETE', ENDPOINT_SLICES, webSlice([])).catch(() => {});
    });

    test('services created, changed and deleted: rules and real connections follow; health and metrics served', async (t) => {
      if (!requireRoot(t)) return;
      const [pod0, pod1] = c.topo.nodes[0]!.pods;
      const daemon = c.startDaemon();
      t.after(() => daemon.kill());
      await daemon.waitFor('"rules synced"', SYNC_DEADLINE_MS);

      await c.write('POST', SERVICES, webService());
      await c.write('POST', ENDPOINT_SLICES, webSlice([pod0!.ipv4, pod1!.ipv4]));
      await eventually('both pods answer on the ClusterIP', async () => {
        const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80);
        return seen.has(pod0!.name) && seen.has(pod1!.name);
      });
      await eventually('the NodePort answers from outside', async () => {
        return (await backends(c, c.topo.client.ns, c.topo.nodes[0]!.ipv4, NODE_PORT, 4)).size > 0;
      });
      if (mode === 'nftables') {
        // A ServiceCIDR created in the cluster reaches the rules (kube-proxy's cluster-ips-check).
        const CHECK = 'cluster-ips-check';
        const serviceCIDR = { metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.0/16'] } };
        await c.write('POST', SERVICE_CIDRS, serviceCIDR);
        await eventually('unallocated addresses of the ServiceCIDR are dropped', async () => {
          const listed = await c.topo.lab.exec(c.nodeNs, 'nft', ['list', 'chain', 'ip', 'kproxy', CHECK]);
          return listed.stdout.includes('ip daddr 10.96.0.0/16 drop');
        });
      }

      await c.write('PUT', ENDPOINT_SLICES, webSlice([pod1!.ipv4]));
      await eventually('only pod 1 answers after its slice changed', async () => {
        const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80);
        return seen.size === 1 && seen.has(pod1!.name);
      });

      const healthz = await c.get('http://127.0.0.1:10256/healthz');
      assert.equal(healthz.status, 200, healthz.body);
      assert.equal((JSON.parse(healthz.body) as { nodeEligible: boolean }).nodeEligible, true);
      const metrics = await c.get('http://127.0.0.1:10249/metrics');
      assert.equal(metrics.status, 200);
      assert.match(
        metrics.body,
        /^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} [1-9]/m,
      );
      assert.match(
        metrics.body,
        /^kubeproxy_sync_partial_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]/m,
      );
      assert.match(metrics.body, /^kubeproxy_sync_proxy_rules_endpoint_changes_total 2$/m);
      assert.match(metrics.body, /^process_resident_memory_bytes /m);
      assert.equal((await c.get('http://127.0.0.1:10249/proxyMode')).body, mode);

      // A LoadBalancer with externalTrafficPolicy Local gets its health check node port.
      const lb = sampleService('default', 'lb', { clusterIP: '10.96.0.20' });
      Object.assign(lb.spec as object, {
        type: 'LoadBalancer',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: HEALTH_CHECK_PORT,
        ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30081 }],
      });
      Object.assign(lb, { status: { loadBalancer: { ingress: [{ ip: '192.0.2.10' }] } } });
      await c.write('POST', SERVICES, lb);
      await c.write(
        'POST',
        ENDPOINT_SLICES,
        sampleEndpointSlice('default', 'lb-abc', {
          service: 'lb',
          addresses: [pod0!.ipv4],
          nodeName: 'node-0',
        }),
      );
      // On the node's address: health check node ports listen on the NodePort addresses only
      // (nftables' default is the node's primary IP, as kube-proxy's).
      const healthCheckUrl = `http://${c.topo.nodes[0]!.ipv4}:${HEALTH_CHECK_PORT}/`;
      await eventually('the health check node port answers 200', async () => {
        return (await c.get(healthCheckUrl)).status === 200;
      });
      assert.deepEqual(JSON.parse((await c.get(healthCheckUrl)).body), {
        service: { namespace: 'default', name: 'lb' },
        localEndpoints: 1,
        serviceProxyHealthy: true,
      });

      await c.write('DELETE', SERVICES, webService());
      await eventually('the ClusterIP stops answering once the service is gone', async () => {
        const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80, 2);
        return ![...seen.keys()].some((k) => k.startsWith('node-'));
      });
      assert.deepEqual(await daemon.stop(STOP_DEADLINE_MS), CLEAN_EXIT, daemon.output());
      assert.notEqual(await ownRules(c, mode), '', 'a stopped daemon leaves its rules');
      const cleanup = await c.topo.lab.exec(c.nodeNs, NODE_BIN, [KPROXY, 'cleanup', '--mode', mode], {
        reject: false,
      });
      assert.equal(cleanup.exitCode, 0, cleanup.stderr);
      const left = await ownRules(c, mode);
      assert.equal(left, '', 'kproxy cleanup removes them');
    });

    test('a restart under traffic keeps established connections; the rules stay while it is down', async (t) => {
      if (!requireRoot(t)) return;
      const [pod0] = c.topo.nodes[0]!.pods;
      await c.write('POST', SERVICES, webService());
      await c.write('POST', ENDPOINT_SLICES, webSlice([pod0!.ipv4]));
      const first = c.startDaemon();
      t.after(() => first.kill());
      await first.waitFor('"rules synced"', SYNC_DEADLINE_MS);
      await eventually('the NodePort answers', async () =>
        (await backends(c, c.topo.client.ns, c.topo.nodes[0]!.ipv4, NODE_PORT, 2)).has(pod0!.name),
      );

      const holder = await c.topo.holdConnection(c.topo.client.ns, c.topo.nodes[0]!.ipv4, NODE_PORT);
      t.after(() => holder.kill());
      const held = heldConnection(holder.output, () => holder.kill());
      assert.equal(held.backend, pod0!.name);
      // SIGTERM: a clean stop that leaves the rules.
      assert.deepEqual(await first.stop(STOP_DEADLINE_MS), CLEAN_EXIT, first.output());
      assert.match(first.output(), /"stopped; rules left in place"/);
      assert.ok(await held.alive(), `the held connection echoes while kproxy is down: ${holder.output()}`);
      const whileDown = await c.topo.connect(c.topo.client.ns, 'tcp', c.topo.nodes[0]!.ipv4, NODE_PORT, {
        count: 3,
      });
      assert.deepEqual(
        [...tally(whileDown).keys()],
        [pod0!.name],
        'new connections work while kproxy is down',
      );

      const second = c.startDaemon();
      t.after(() => second.kill());
      await second.waitFor('"rules synced"', SYNC_DEADLINE_MS);
      assert.ok(await held.alive(), `the held connection survived the restart: ${holder.output()}`);
      await held.close();
      assert.deepEqual(await second.stop(STOP_DEADLINE_MS), CLEAN_EXIT, second.output());
    });

    // What an outage asks of the dataplane (its rules kept while the server is gone, a resync after)
    // is the sync loop's, the same in every mode; the version walk (daemon-versions-netns.test.ts)
    // takes the IPVS node's server away too (a restart, a 503, a reset, a 429) and checks a change
    // gets through after. So IPVS, emulated in the VM at ~100 s a test, does not run this one.
    if (mode !== 'ipvs')
      test('an API server outage keeps the rules, turns /healthz 503, and recovery resyncs', async (t) => {
        if (!requireRoot(t)) return;
        const [pod0, pod1] = c.topo.nodes[0]!.pods;
        await c.write('POST', SERVICES, webService());
        await c.write('POST', ENDPOINT_SLICES, webSlice([pod0!.ipv4]));
        const daemon = c.startDaemon();
        t.after(() => daemon.kill());
        await daemon.waitFor('"rules synced"', SYNC_DEADLINE_MS);
        await eventually('pod 0 answers', async () =>
          (await backends(c, c.nodeNs, CLUSTER_IP, 80, 2)).has(pod0!.name),
        );

        await c.blockApi(true);
        // The health timeout is 2 × syncPeriod = 2 s after the contact is lost (a bookmark a second).
        await eventually(
          'healthz 503 during the outage',
          async () => (await c.get('http://127.0.0.1:10256/healthz')).status === 503,
        );
        assert.deepEqual(
          [...(await backends(c, c.nodeNs, CLUSTER_IP, 80, 4)).keys()],
          [pod0!.name],
          'rules stay',
        );

        // The cluster moves on while the node cannot see it: web now on pod 1.
        await c.write('PUT', ENDPOINT_SLICES, webSlice([pod1!.ipv4]));
        const before = syncCount(daemon);
        await c.blockApi(false);
        // The informers retry with capped backoff: the next attempt may be BACKOFF_MAX_MS away.
        await eventually(
          'a resync after recovery',
          () => syncCount(daemon) > before,
          BACKOFF_MAX_MS + SYNC_DEADLINE_MS,
        );
        await eventually('pod 1 answers after recovery', async () => {
          const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80, 4);
          return seen.size === 1 && seen.has(pod1!.name);
        });
        await eventually(
          'healthz 200 again',
          async () => (await c.get('http://127.0.0.1:10256/healthz')).status === 200,
        );
      });
  });
}
