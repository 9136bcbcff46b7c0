import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ServiceSpec } from '../../src/kube/objects.ts';
import {
  addresses,
  build,
  type EndpointExtra,
  endpoint,
  node,
  portOf,
  service,
  slice,
  THIS_NODE,
} from './fixtures.ts';

const WEB = 'default/web:80/TCP';
const ZONE = 'zone-a';

/** Cluster and Local endpoints of "web" as seen from node-1 in zone-a. */
function select(endpoints: [string, EndpointExtra][], spec: ServiceSpec = {}, zone = ZONE) {
  const thisNode = node(THIS_NODE, { internalIPs: ['192.168.0.1'], ...(zone && { zone }) });
  const objects = [
    service('web', spec),
    slice(
      'web',
      endpoints.map(([ip, extra]) => endpoint(ip, extra)),
    ),
    thisNode,
  ];
  const port = portOf(build(objects), WEB);
  return { cluster: addresses(port.clusterEndpoints), local: addresses(port.localEndpoints) };
}

describe('zone hints (PreferClose / PreferSameZone)', () => {
  it('uses only endpoints hinted for this node’s zone when every ready endpoint has a hint', () => {
    const got = select([
      ['10.244.1.1', { zones: [ZONE] }],
      ['10.244.2.1', { zones: ['zone-b'] }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080']);
  });

  it('ignores hints when one ready endpoint has none', () => {
    const got = select([
      ['10.244.1.1', { zones: [ZONE] }],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080', '10.244.2.1:8080']);
  });

  it('ignores a missing hint on an endpoint that is not ready', () => {
    const got = select([
      ['10.244.1.1', { zones: [ZONE] }],
      ['10.244.2.1', { zones: ['zone-b'] }],
      ['10.244.2.2', { ready: false }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080']);
  });

  it('ignores hints when none is for this zone', () => {
    const got = select([
      ['10.244.1.1', { zones: ['zone-b'] }],
      ['10.244.2.1', { zones: ['zone-c'] }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080', '10.244.2.1:8080']);
  });

  it('ignores hints when this node has no zone label', () => {
    const got = select(
      [
        ['10.244.1.1', { zones: [ZONE] }],
        ['10.244.2.1', { zones: ['zone-b'] }],
      ],
      {},
      '',
    );
    assert.deepEqual(got.cluster, ['10.244.1.1:8080', '10.244.2.1:8080']);
  });
});

describe('node hints (PreferSameNode)', () => {
  it('uses only endpoints hinted for this node when every ready endpoint has a node hint', () => {
    const got = select([
      ['10.244.1.1', { nodes: [THIS_NODE], zones: [ZONE], nodeName: THIS_NODE }],
      ['10.244.1.2', { nodes: ['node-3'], zones: [ZONE] }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080']);
  });

  it('falls back to zone hints when no endpoint is hinted for this node', () => {
    const got = select([
      ['10.244.1.1', { nodes: ['node-3'], zones: [ZONE] }],
      ['10.244.2.1', { nodes: ['node-4'], zones: ['zone-b'] }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080']);
  });
});

describe('topology and the rest of the selection', () => {
  it('does not narrow Local traffic', () => {
    const spec: ServiceSpec = { internalTrafficPolicy: 'Local' };
    const got = select(
      [
        ['10.244.1.1', { nodeName: THIS_NODE, zones: ['zone-b'] }],
        ['10.244.1.2', { nodeName: THIS_NODE, zones: [ZONE] }],
      ],
      spec,
    );
    assert.deepEqual(got.local, ['10.244.1.1:8080', '10.244.1.2:8080']);
  });

  it('falls back to terminating endpoints anywhere, ignoring hints, when none is ready', () => {
    const terminating = { ready: false, serving: true, terminating: true };
    const got = select([
      ['10.244.1.1', { ...terminating, zones: [ZONE] }],
      ['10.244.2.1', { ...terminating, zones: ['zone-b'] }],
    ]);
    assert.deepEqual(got.cluster, ['10.244.1.1:8080', '10.244.2.1:8080']);
  });
});
