// Kernel test (issue 29): `kproxy run --service-proxy-name kproxy` against the stand-in API server
// serves only the Service labelled service.kubernetes.io/service-proxy-name=kproxy (the server
// applies the informers' label selector), leaves the unlabelled one to kube-proxy, and follows a
// label moved either way with real connections. kube-proxy itself is not running here.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { requireRoot } from '../../harness/netns.ts';
import { tally } from '../../harness/topology.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import { backends, CLEAN_EXIT, cluster, STOP_DEADLINE_MS, SYNC_DEADLINE_MS } from './netns-cluster.ts';

const PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
const KUBE_IP = '10.96.0.20';
const MOVED_IP = '10.96.0.30';
/** A SYN nobody DNATs goes unanswered: an attempt that long unanswered counts as not served. */
const UNSERVED_TIMEOUT_MS = 1000;

describe('kproxy run --service-proxy-name (nftables)', () => {
  test('only the Services labelled with the name are served, and a moved label moves the Service', async (t) => {
    if (!requireRoot(t)) return;
    const c = await cluster(t, 'nftables');
    const [pod0, pod1] = c.topo.nodes[0]!.pods;
    const labelled = (proxy: string): Record<string, string> =>
      proxy === 'kproxy' ? { [PROXY_NAME]: 'kproxy' } : {};
    const write = async (
      method: 'POST' | 'PUT',
      name: string,
      clusterIP: string,
      pod: string,
      proxy: string,
    ) => {
      await c.write(
        method,
        SERVICES,
        sampleService('default', name, { clusterIP, port: 80, labels: labelled(proxy) }),
      );
      await c.write(
        method,
        ENDPOINT_SLICES,
        sampleEndpointSlice('default', `${name}-abc`, {
          service: name,
          addresses: [pod],
          nodeName: 'node-0',
          labels: labelled(proxy),
        }),
      );
    };
    await write('POST', 'kube', KUBE_IP, pod0!.ipv4, 'kube-proxy');
    await write('POST', 'moved', MOVED_IP, pod1!.ipv4, 'kproxy');
    const daemon = c.startDaemon('nftables', ['--service-proxy-name', 'kproxy']);
    await daemon.waitFor('rules synced', SYNC_DEADLINE_MS);

    const served = async (ip: string) => backends(c, c.nodeNs, ip, 80, 2);
    const unserved = async (ip: string) => {
      const outcomes = await c.topo.connect(c.nodeNs, 'tcp', ip, 80, {
        count: 2,
        timeoutMs: UNSERVED_TIMEOUT_MS,
      });
      return [...tally(outcomes).keys()].every((key) => key.startsWith('error:'));
    };
    await eventually('the labelled Service answers', async () => (await served(MOVED_IP)).has(pod1!.name));
    assert.ok(await unserved(KUBE_IP), 'the unlabelled Service is left to kube-proxy');

    // The operator moves "kube" to kproxy and "moved" back to kube-proxy.
    await write('PUT', 'kube', KUBE_IP, pod0!.ipv4, 'kproxy');
    await write('PUT', 'moved', MOVED_IP, pod1!.ipv4, 'kube-proxy');
    await eventually('the newly labelled Service answers', async () =>
      (await served(KUBE_IP)).has(pod0!.name),
    );
    await eventually('the unlabelled one is no longer served', () => unserved(MOVED_IP));
    assert.deepEqual(await daemon.stop(STOP_DEADLINE_MS), CLEAN_EXIT, daemon.output());
  });
});
