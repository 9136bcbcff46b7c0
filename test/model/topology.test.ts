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

// kube-proxy's rules, row by row (pkg/proxy/topology.go: CategorizeEndpoints, topologyModeFromHints,
// availableForTopology, as of the PreferSameTrafficDistribution GA in 1.35; the zone rows are
// TestCategorizeEndpoints' own in pkg/proxy/topology_test.go, renamed to this fixture's addresses).
// Expectations come from those rules, not from kproxy's output:
//   - only ready endpoints vote; an unready one's hints (or lack of them) do not count;
//   - PreferSameNode when every ready endpoint has a node hint and one names this node; it wins
//     over zone hints, whether or not those are complete;
//   - else PreferSameZone when every ready endpoint has a zone hint and one names this node's zone
//     (a node without a zone label matches none);
//   - else every ready endpoint (hints ignored); with no ready endpoint at all, every
//     serving+terminating one, hints ignored;
//   - Local traffic (iTP or eTP Local) takes every local endpoint, never narrowed by hints.
// trafficDistribution itself is not read (the EndpointSlice controller turns PreferClose /
// PreferSameZone / PreferSameNode into these hints), so PreferClose needs no alias here.
describe("kube-proxy's topology rules, table-driven", () => {
  const NODE_PORT_LOCAL: ServiceSpec = {
    type: 'NodePort',
    externalTrafficPolicy: 'Local',
    ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 }],
  };
  const ITP_LOCAL_NODE_PORT: ServiceSpec = {
    type: 'NodePort',
    internalTrafficPolicy: 'Local',
    ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 }],
  };
  const here = { nodeName: THIS_NODE };
  const unready = { ready: false };
  const terminating = { ready: false, serving: true, terminating: true };
  const rows: {
    name: string;
    endpoints: [string, EndpointExtra][];
    zone?: string;
    spec?: ServiceSpec;
    cluster: string[];
    local?: string[];
  }[] = [
    {
      name: 'normal endpoint filtering',
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'] }],
        ['10.1.2.4', { zones: ['zone-b'] }],
        ['10.1.2.5', { zones: ['zone-c'] }],
        ['10.1.2.6', { zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.6'],
    },
    {
      name: 'unready endpoint',
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'] }],
        ['10.1.2.4', { zones: ['zone-b'] }],
        ['10.1.2.5', { zones: ['zone-c'] }],
        ['10.1.2.6', { zones: ['zone-a'], ...unready }],
      ],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'only unready endpoints in same zone (should not filter)',
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'], ...unready }],
        ['10.1.2.4', { zones: ['zone-b'] }],
        ['10.1.2.5', { zones: ['zone-c'] }],
        ['10.1.2.6', { zones: ['zone-a'], ...unready }],
      ],
      cluster: ['10.1.2.4', '10.1.2.5'],
    },
    {
      name: 'missing hints, no filtering applied',
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'] }],
        ['10.1.2.4', { zones: ['zone-b'] }],
        ['10.1.2.5', {}],
        ['10.1.2.6', { zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.4', '10.1.2.5', '10.1.2.6'],
    },
    {
      name: 'multiple hints per endpoint, filtering includes any endpoint with zone included',
      zone: 'zone-c',
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a', 'zone-b', 'zone-c'] }],
        ['10.1.2.4', { zones: ['zone-b', 'zone-c'] }],
        ['10.1.2.5', { zones: ['zone-b', 'zone-d'] }],
        ['10.1.2.6', { zones: ['zone-c'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.4', '10.1.2.6'],
    },
    {
      name: 'empty zone label',
      zone: '',
      endpoints: [['10.1.2.3', { zones: ['zone-a'] }]],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'node in different zone, no endpoint filtering',
      zone: 'zone-b',
      endpoints: [['10.1.2.3', { zones: ['zone-a'] }]],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'externalTrafficPolicy: Local, topology ignored for Local endpoints',
      spec: NODE_PORT_LOCAL,
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'], ...here }],
        ['10.1.2.4', { zones: ['zone-b'], ...here }],
        ['10.1.2.5', { zones: ['zone-c'] }],
        ['10.1.2.6', { zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.6'],
      local: ['10.1.2.3', '10.1.2.4'],
    },
    {
      name: 'internalTrafficPolicy: Local, topology ignored for Local endpoints',
      spec: ITP_LOCAL_NODE_PORT,
      endpoints: [
        ['10.1.2.3', { zones: ['zone-a'], ...here }],
        ['10.1.2.4', { zones: ['zone-b'], ...here }],
        ['10.1.2.5', { zones: ['zone-c'] }],
        ['10.1.2.6', { zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.6'],
      local: ['10.1.2.3', '10.1.2.4'],
    },
    {
      name: 'PreferSameNode: node hints for this node win over (complete) zone hints',
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], zones: ['zone-a'], ...here }],
        ['10.1.2.4', { nodes: ['node-3'], zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'PreferSameNode: zone hints need not be complete',
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], ...here }],
        ['10.1.2.4', { nodes: ['node-3'], zones: ['zone-a'] }],
      ],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'PreferSameNode: a ready endpoint without a node hint falls back to zone hints',
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], zones: ['zone-a'], ...here }],
        ['10.1.2.4', { zones: ['zone-a'] }],
        ['10.1.2.5', { nodes: ['node-3'], zones: ['zone-b'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.4'],
    },
    {
      name: 'PreferSameNode: no hint for this node falls back to zone hints, then to all',
      endpoints: [
        ['10.1.2.3', { nodes: ['node-3'] }],
        ['10.1.2.4', { nodes: ['node-4'] }],
      ],
      cluster: ['10.1.2.3', '10.1.2.4'],
    },
    {
      name: 'PreferSameNode: only an unready endpoint is hinted for this node, so it does not count',
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], zones: ['zone-a'], ...here, ...unready }],
        ['10.1.2.4', { nodes: ['node-3'], zones: ['zone-a'] }],
        ['10.1.2.5', { nodes: ['node-4'], zones: ['zone-b'] }],
      ],
      cluster: ['10.1.2.4'],
    },
    {
      name: 'PreferSameNode: an unready endpoint without hints does not stop them',
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], ...here }],
        ['10.1.2.4', { nodes: ['node-3'] }],
        ['10.1.2.5', unready],
      ],
      cluster: ['10.1.2.3'],
    },
    {
      name: 'no ready endpoint: every serving+terminating one, node and zone hints ignored',
      endpoints: [
        ['10.1.2.3', { nodes: ['node-3'], zones: ['zone-b'], ...terminating }],
        ['10.1.2.4', { nodes: [THIS_NODE], zones: [ZONE], ...here, ...terminating }],
      ],
      cluster: ['10.1.2.3', '10.1.2.4'],
    },
    {
      name: 'eTP Local with node hints: Local takes every local endpoint, Cluster the hinted one',
      spec: NODE_PORT_LOCAL,
      endpoints: [
        ['10.1.2.3', { nodes: [THIS_NODE], ...here }],
        ['10.1.2.4', { nodes: ['node-3'], ...here }],
        ['10.1.2.5', { nodes: ['node-3'] }],
      ],
      cluster: ['10.1.2.3'],
      local: ['10.1.2.3', '10.1.2.4'],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const got = select(row.endpoints, row.spec ?? {}, row.zone ?? ZONE);
      const at8080 = (ips: string[]) => ips.map((ip) => `${ip}:8080`);
      assert.deepEqual(got.cluster, at8080(row.cluster), 'Cluster endpoints');
      assert.deepEqual(got.local, at8080(row.local ?? []), 'Local endpoints');
    });
  }
});
