// The bundled example promises (examples/README.md) to cover every Service feature; these checks
// keep that promise when someone edits it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ServicePort } from '../../contract/proxy-state.ts';
import { buildProxyState } from '../../src/model/build-state.ts';
import { groupObjects } from '../../src/sources/cluster-objects.ts';
import { EXAMPLE_CLUSTER_PATH } from '../../src/sources/example-cluster.ts';
import { readObjects } from '../../src/sources/read-objects.ts';

async function exampleState() {
  const read = await readObjects([EXAMPLE_CLUSTER_PATH], () => Promise.reject(new Error('no stdin')));
  assert.ok(read.ok, !read.ok ? read.error : '');
  assert.deepEqual(read.warnings, [], 'every object in the example is valid');
  const { services, endpointSlices, nodes } = groupObjects(read.objects);
  const built = buildProxyState(
    { services, endpointSlices, node: nodes.find((node) => node.metadata.name === 'node-1') },
    {
      nodeName: 'node-1',
      nodeIPs: [],
      detectLocalMode: 'ClusterCIDR',
      clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
      masqueradeAll: false,
      masqueradeBit: 14,
      nodePortAddresses: [],
    },
  );
  assert.deepEqual(built.problems, []);
  return { nodes, state: built.state };
}

function port(ports: ReadonlyMap<string, ServicePort> | undefined, key: string): ServicePort {
  const found = ports?.get(key);
  assert.ok(found, `${key} is in the state`);
  return found;
}

test('the example has three dual-stack nodes in three zones', async () => {
  const { nodes, state } = await exampleState();
  assert.deepEqual(
    nodes.map((node) => [node.metadata.name, node.metadata.labels?.['topology.kubernetes.io/zone']]),
    [
      ['node-1', 'zone-a'],
      ['node-2', 'zone-b'],
      ['node-3', 'zone-c'],
    ],
  );
  assert.deepEqual(state.IPv4?.node.nodeIPs, ['192.168.10.11']);
  assert.deepEqual(state.IPv6?.node.nodeIPs, ['fd00:192:168:10::11']);
});

test('the example covers every service feature the README lists', async () => {
  const { state } = await exampleState();
  const v4 = state.IPv4?.servicePorts;
  const v6 = state.IPv6?.servicePorts;
  assert.equal(port(v4, 'default/web:80/TCP').clusterEndpoints.length, 3);
  assert.equal(port(v4, 'kube-system/kube-dns:53/UDP').protocol, 'UDP');
  assert.equal(port(v4, 'kube-system/kube-dns:53/TCP').protocol, 'TCP');
  assert.equal(port(v4, 'shop/frontend:80/TCP').nodePort, 30080);
  assert.equal(port(v4, 'shop/api:8443/TCP').clusterEndpoints.at(0)?.port, 9443, 'named target port');
  const storefront = port(v4, 'shop/storefront:443/TCP');
  assert.deepEqual(storefront.loadBalancerIPs, ['203.0.113.10']);
  assert.deepEqual(storefront.loadBalancerSourceRanges, ['198.51.100.0/24', '203.0.113.0/24']);
  const checkout = port(v4, 'shop/checkout:443/TCP');
  assert.equal(checkout.externalPolicyLocal, true);
  assert.equal(checkout.healthCheckNodePort, 32100);
  assert.equal(checkout.localEndpoints.length, 1, 'node-1 has one local checkout endpoint');
  assert.deepEqual(
    port(v4, 'ingress-nginx/ingress-nginx-controller:80/TCP').loadBalancerIPs,
    [],
    'ipMode Proxy',
  );
  assert.deepEqual(port(v4, 'shop/legacy-portal:80/TCP').loadBalancerIPs, [], 'hostname-only ingress');
  assert.deepEqual(port(v4, 'monitoring/grafana:3000/TCP').externalIPs, ['192.168.10.100']);
  assert.equal(port(v4, 'shop/cart:80/TCP').sessionAffinity?.timeoutSeconds, 3600);
  assert.equal(port(v4, 'monitoring/node-exporter:9100/TCP').internalPolicyLocal, true);
  assert.equal(port(v4, 'shop/recommendations:80/TCP').hasEndpoints, false);
  const terminating = port(v4, 'shop/legacy-payments:80/TCP');
  assert.ok(
    terminating.clusterEndpoints.length > 0 && terminating.clusterEndpoints.every((e) => e.terminating),
  );
  assert.equal(port(v4, 'shop/search:9200/TCP').clusterEndpoints.length, 0, 'not-ready endpoints unused');
  assert.equal(port(v4, 'shop/catalog:80/TCP').clusterEndpoints.length, 1, 'zone hints keep zone-a only');
  assert.equal(port(v4, 'shop/inventory:80/TCP').clusterEndpoints.length, 1, 'PreferClose keeps zone-a only');
  assert.equal(port(v4, 'monitoring/syslog:514/UDP').protocol, 'UDP');
  assert.equal(port(v4, 'telecom/diameter:3868/SCTP').protocol, 'SCTP');
  assert.equal(port(v6, 'default/web-dual:80/TCP').clusterIP, 'fd00:10:96::11');
  assert.equal(port(v4, 'default/web-dual:80/TCP').clusterIP, '10.96.10.11');
  assert.equal(port(v6, 'shop/payments:443/TCP').nodePort, 30444);
  assert.equal(port(v4, 'shop/payments:443/TCP').nodePort, 30444);
  assert.equal(port(v6, 'default/echo-v6:80/TCP').clusterEndpoints.length, 2);
  assert.equal(v4?.has('default/echo-v6:80/TCP'), false, 'IPv6-only service');
  for (const skipped of ['shop/postgres:5432/TCP', 'default/mesh-gateway:80/TCP']) {
    assert.equal(v4?.has(skipped), false, `${skipped} is skipped`);
  }
  assert.ok(
    ![...(v4?.keys() ?? [])].some((key) => key.startsWith('shop/payments-provider:')),
    'ExternalName',
  );
});
