// Kernel test (issue 29): `kproxy run --service-proxy-name kproxy` against the stand-in API server
// serves only the Service labelled service.kubernetes.io/service-proxy-name=kproxy (the server
// applies the informers' label selector), leaves the unlabelled one to kube-proxy, and follows a
// label moved either way with real connections. kube-proxy itself is not running here.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sampleEndpointSlice, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { requireRoot } from '../../harness/netns.ts';
import { tally } from '../../harness/topology.ts';
import { HANDOVER_LABEL } from '../../src/kube/objects.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLEAN_EXIT,
  cluster,
  failures,
  STEADY_PER_SECOND,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  steadyClient,
} from './netns-cluster.ts';

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

  // The handover label (src/model/proxy-labels.ts): kproxy serves the Service before kube-proxy
  // lets it go and until after it takes it back, so a steady client meets kproxy's rules at every
  // step of the README's move. The slice keeps no label throughout, as before the EndpointSlice
  // controller copies the Service's: kproxy takes a slice by its Service.
  test('a Service moved through the handover label is served by kproxy at every step, both ways', async (t) => {
    if (!requireRoot(t)) return;
    const c = await cluster(t, 'nftables');
    const pod = c.topo.nodes[0]!.pods[0]!;
    const web = (labels: Record<string, string>) =>
      sampleService('default', 'web', { clusterIP: MOVED_IP, port: 80, labels });
    await c.write('POST', SERVICES, web({}));
    await c.write(
      'POST',
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-abc', {
        service: 'web',
        addresses: [pod.ipv4],
        nodeName: 'node-0',
      }),
    );
    const daemon = c.startDaemon('nftables', ['--service-proxy-name', 'kproxy']);
    await daemon.waitFor('rules synced', SYNC_DEADLINE_MS);

    await c.write('PUT', SERVICES, web({ [HANDOVER_LABEL]: 'kproxy' }));
    await eventually('kproxy serves the Service labelled for the handover', async () =>
      (await backends(c, c.nodeNs, MOVED_IP, 80, 2)).has(pod.name),
    ).catch((error: unknown) => assert.fail(`${error}\n${daemon.output()}`));
    const client = steadyClient(c, [{ fromNs: c.nodeNs, proto: 'tcp', host: MOVED_IP, port: 80 }]);
    t.after(() => client.stop());
    // Each step, there and back, then a second of traffic (STEADY_PER_SECOND attempts) after it.
    const steps: Record<string, string>[] = [
      { [HANDOVER_LABEL]: 'kproxy', [PROXY_NAME]: 'kproxy' },
      { [PROXY_NAME]: 'kproxy' },
      { [HANDOVER_LABEL]: 'kproxy', [PROXY_NAME]: 'kproxy' },
      { [HANDOVER_LABEL]: 'kproxy' },
    ];
    for (const labels of steps) {
      await c.write('PUT', SERVICES, web(labels));
      const after = client.started() + STEADY_PER_SECOND;
      await eventually('a second of attempts after the step', async () => client.started() >= after);
    }
    const [outcomes] = await client.stop();
    assert.deepEqual(failures(outcomes!), [], 'every connection during the move');
    assert.ok(outcomes!.length >= 4 * STEADY_PER_SECOND, `only ${outcomes!.length} attempts`);

    // The handover label goes last: kube-proxy has the Service again, kproxy lets it go.
    await c.write('PUT', SERVICES, web({}));
    await eventually('kproxy no longer serves it', async () => {
      const outcomes = await c.topo.connect(c.nodeNs, 'tcp', MOVED_IP, 80, {
        count: 2,
        timeoutMs: UNSERVED_TIMEOUT_MS,
      });
      return [...tally(outcomes).keys()].every((key) => key.startsWith('error:'));
    });
    assert.deepEqual(await daemon.stop(STOP_DEADLINE_MS), CLEAN_EXIT, daemon.output());
  });
});
