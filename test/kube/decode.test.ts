import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DecodeResult, decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, KubeObject, Node, Service, ServiceCIDR } from '../../src/kube/objects.ts';

/** A Service as `kubectl get svc -o json` prints it, trimmed to what matters plus some noise. */
function rawService(
  spec: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: 'web',
      namespace: 'default',
      resourceVersion: '123',
      uid: 'b1e0f2c4',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { app: 'web', 'service.kubernetes.io/service-proxy-name': 'kproxy' },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"huge":true}' },
      managedFields: [{ manager: 'kubectl' }],
    },
    spec: {
      type: 'ClusterIP',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      selector: { app: 'web' },
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
      ...spec,
    },
    status: { loadBalancer: {} },
    ...extra,
  };
}

function rawSlice(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'web-abc12',
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': 'web' },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z', other: 'x' },
      ownerReferences: [{ kind: 'Service', name: 'web' }],
    },
    addressType: 'IPv4',
    endpoints: [
      {
        addresses: ['10.244.1.5'],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: 'node-1',
        zone: 'zone-a',
        targetRef: { kind: 'Pod', name: 'web-1' },
        hints: { forZones: [{ name: 'zone-a' }] },
      },
    ],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    ...fields,
  };
}

function decoded<T extends KubeObject>(raw: unknown): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') assert.fail(JSON.stringify(result));
  return result.object as T;
}

function reasonOf(result: DecodeResult): string {
  assert.equal(result.kind, 'invalid', JSON.stringify(result));
  return (result as { problem: { reason: string } }).problem.reason;
}

describe('decodeObject: what it accepts', () => {
  it('decodes a Service and keeps only the fields kproxy reads', () => {
    const svc = decoded<Service>(rawService());
    assert.deepEqual(svc, {
      kind: 'Service',
      metadata: {
        name: 'web',
        namespace: 'default',
        resourceVersion: '123',
        // Kept for Services, in seconds: the older of two claiming one address keeps it.
        creationTimestamp: 1767225600,
        // Only the labels kproxy reads; no uid.
        labels: { 'service.kubernetes.io/service-proxy-name': 'kproxy' },
      },
      spec: {
        type: 'ClusterIP',
        clusterIP: '10.96.0.10',
        clusterIPs: ['10.96.0.10'],
        ipFamilies: ['IPv4'],
        ipFamilyPolicy: 'SingleStack',
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
      },
    });
  });

  it('decodes an EndpointSlice, keeping the trigger-time annotation and dropping other noise', () => {
    const slice = decoded<EndpointSlice>(rawSlice());
    assert.deepEqual(slice, {
      kind: 'EndpointSlice',
      metadata: {
        name: 'web-abc12',
        namespace: 'default',
        labels: { 'kubernetes.io/service-name': 'web' },
        annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z' },
      },
      addressType: 'IPv4',
      endpoints: [
        {
          addresses: ['10.244.1.5'],
          conditions: { ready: true, serving: true, terminating: false },
          nodeName: 'node-1',
          zone: 'zone-a',
          hints: { forZones: [{ name: 'zone-a' }] },
        },
      ],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
  });

  it('decodes a Node with its addresses, pod CIDRs and labels', () => {
    const node = decoded<Node>({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-1', labels: { 'topology.kubernetes.io/zone': 'zone-a' } },
      spec: { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24', 'fd00:244:0:1::/64'] },
      status: {
        addresses: [
          { type: 'InternalIP', address: '192.168.0.1' },
          { type: 'Hostname', address: 'node-1' },
        ],
        capacity: { cpu: '2' },
      },
    });
    assert.deepEqual(node.spec?.podCIDRs, ['10.244.1.0/24', 'fd00:244:0:1::/64']);
    assert.deepEqual(node.status?.addresses, [
      { type: 'InternalIP', address: '192.168.0.1' },
      { type: 'Hostname', address: 'node-1' },
    ]);
    assert.equal(node.metadata.namespace, undefined);
  });

  it('decodes a ServiceCIDR: its CIDRs in canonical form, the rest dropped', () => {
    const raw = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'ServiceCIDR',
      metadata: { name: 'kubernetes' },
      spec: { cidrs: ['10.96.0.1/12', 'FD00:96::/112'] },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    };
    assert.deepEqual(decoded<ServiceCIDR>(raw), {
      kind: 'ServiceCIDR',
      metadata: { name: 'kubernetes' },
      spec: { cidrs: ['10.96.0.0/12', 'fd00:96::/112'] },
    });
    // The beta versions are not read (GA since 1.33).
    assert.equal(decodeObject({ ...raw, apiVersion: 'networking.k8s.io/v1beta1' }).kind, 'ignored');
  });

  it('accepts items without apiVersion, as in a kubectl List', () => {
    const raw = rawService();
    delete raw.apiVersion;
    assert.equal(decodeObject(raw).kind, 'object');
  });

  it('fills in the defaults the API server would: namespace, type, protocols', () => {
    const svc = decoded<Service>({
      kind: 'Service',
      metadata: { name: 'web' },
      spec: { clusterIP: '10.96.0.10', ports: [{ port: 80 }] },
    });
    assert.equal(svc.metadata.namespace, 'default');
    assert.equal(svc.spec.type, 'ClusterIP');
    assert.equal(svc.spec.ports?.[0]?.protocol, 'TCP');
    const slice = decoded<EndpointSlice>(rawSlice({ ports: [{ name: 'http', port: 8080 }] }));
    assert.equal(slice.ports?.[0]?.protocol, 'TCP');
  });

  it('stores IPs and CIDRs in canonical form', () => {
    const svc = decoded<Service>(
      rawService({
        clusterIP: 'FD00:96::0010',
        clusterIPs: ['FD00:96::0010'],
        ipFamilies: ['IPv6'],
        loadBalancerSourceRanges: [' 10.1.2.3/8 '],
      }),
    );
    assert.equal(svc.spec.clusterIP, 'fd00:96::10');
    assert.deepEqual(svc.spec.clusterIPs, ['fd00:96::10']);
    assert.deepEqual(svc.spec.loadBalancerSourceRanges, ['10.0.0.0/8']);
  });

  it('keeps a creation time as seconds: offsets and fractions give the instant, so ties and order stay exact', () => {
    const created = (creationTimestamp: string) =>
      decoded<Service>({ ...rawService(), metadata: { name: 'web', creationTimestamp } }).metadata
        .creationTimestamp;
    assert.equal(created('2025-01-01T01:00:00+01:00'), created('2025-01-01T00:00:00Z'));
    assert.equal(created('2026-01-01T00:00:00.250Z'), 1767225600.25);
    assert.ok(created('2026-01-01T00:00:00.001Z')! > created('2026-01-01T00:00:00Z')!);
    assert.equal(
      decoded<Service>({ ...rawService(), metadata: { name: 'web' } }).metadata.creationTimestamp,
      undefined,
    );
  });

  it('accepts a headless service', () => {
    const svc = decoded<Service>(rawService({ clusterIP: 'None', clusterIPs: ['None'] }));
    assert.equal(svc.spec.clusterIP, 'None');
  });

  it('drops null endpoint conditions, which mean "unknown"', () => {
    const slice = decoded<EndpointSlice>(
      rawSlice({ endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: null, serving: true } }] }),
    );
    assert.deepEqual(slice.endpoints?.[0]?.conditions, { serving: true });
  });

  it('keeps load balancer ingress IPs, hostnames and ipMode', () => {
    const svc = decoded<Service>(
      rawService(
        { type: 'LoadBalancer' },
        {
          status: {
            loadBalancer: {
              ingress: [{ ip: '198.51.100.1', ipMode: 'Proxy', ports: [] }, { hostname: 'lb.example.com' }],
            },
          },
        },
      ),
    );
    assert.deepEqual(svc.status?.loadBalancer?.ingress, [
      { ip: '198.51.100.1', ipMode: 'Proxy' },
      { hostname: 'lb.example.com' },
    ]);
  });
});

describe('decodeObject: what it ignores', () => {
  const cases: [string, unknown, RegExp][] = [
    ['another kind', { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } }, /kind Pod is not used/],
    [
      'an old EndpointSlice version',
      { ...rawSlice(), apiVersion: 'discovery.k8s.io/v1beta1' },
      /v1beta1.*not supported/,
    ],
    [
      'an FQDN EndpointSlice',
      rawSlice({ addressType: 'FQDN', endpoints: [{ addresses: ['db.example.com'] }] }),
      /FQDN/,
    ],
  ];
  for (const [what, raw, reason] of cases) {
    it(`ignores ${what}`, () => {
      const result = decodeObject(raw);
      assert.equal(result.kind, 'ignored');
      assert.match((result as { reason: string }).reason, reason);
    });
  }
});

describe('decodeObject: invalid content names the object and the field', () => {
  it('names the object as "Kind namespace/name"', () => {
    const result = decodeObject(rawService({ ports: [{ port: 0 }] }));
    assert.equal(result.kind, 'invalid');
    assert.equal((result as { problem: { object: string } }).problem.object, 'Service default/web');
  });

  it('names an object without a kind by its metadata, so it can be found among many', () => {
    const result = decodeObject({ metadata: { name: 'web', namespace: 'shop' } });
    assert.deepEqual(result, {
      kind: 'invalid',
      problem: { object: 'object shop/web', reason: 'kind: missing' },
    });
  });

  it('rejects names the API server would not accept: they would break rule comments (a newline crashed the nftables render)', () => {
    for (const name of ['a\nb', 'a"b', 'Web', 'wéb-😀', 'x'.repeat(254)]) {
      const result = decodeObject({ ...rawService({}), metadata: { name } });
      assert.equal(result.kind, 'invalid', JSON.stringify(name));
      assert.match((result as { problem: { reason: string } }).problem.reason, /^metadata\.name: /);
    }
    const namespaced = decodeObject({ ...rawService({}), metadata: { name: 'web', namespace: 'a\nb' } });
    assert.equal(namespaced.kind, 'invalid');
    assert.match((namespaced as { problem: { reason: string } }).problem.reason, /^metadata\.namespace: /);
    assert.equal(decodeObject({ ...rawService({}), metadata: { name: 'web.v2-a' } }).kind, 'object');
  });

  const cases: [string, unknown, string][] = [
    ['a non-object', 'hello', 'expected an object, got "hello"'],
    ['a missing kind', { metadata: { name: 'x' } }, 'kind: missing'],
    ['a missing name', { kind: 'Service', metadata: {}, spec: {} }, 'metadata.name: missing'],
    ['a missing spec', { kind: 'Service', metadata: { name: 'web' } }, 'spec: missing'],
    [
      'a port out of range',
      rawService({
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 70000 },
        ],
      }),
      'spec.ports[1].port: 70000 is not a valid port (1-65535)',
    ],
    [
      'a port given as text',
      rawService({ ports: [{ port: '80' }] }),
      'spec.ports[0].port: "80" is not a valid port (1-65535)',
    ],
    [
      'an unknown protocol',
      rawService({ ports: [{ port: 80, protocol: 'ICMP' }] }),
      'spec.ports[0].protocol: "ICMP" is not TCP, UDP or SCTP',
    ],
    [
      'a bad cluster IP',
      rawService({ clusterIP: '10.0.0.300', clusterIPs: ['10.0.0.300'] }),
      'spec.clusterIP: "10.0.0.300" is not an IP address',
    ],
    [
      'clusterIPs that disagree with clusterIP',
      rawService({ clusterIPs: ['10.96.0.11'] }),
      'spec.clusterIPs[0]: "10.96.0.11" does not match spec.clusterIP "10.96.0.10"',
    ],
    [
      'two cluster IPs of one family',
      rawService({ clusterIPs: ['10.96.0.10', '10.96.0.11'], ipFamilies: ['IPv4', 'IPv4'] }),
      'spec.clusterIPs[1]: "10.96.0.11" has the same IP family as spec.clusterIPs[0]',
    ],
    [
      'an unknown service type',
      rawService({ type: 'Magic' }),
      'spec.type: "Magic" is not ClusterIP, NodePort, LoadBalancer or ExternalName',
    ],
    [
      'a bad external IP',
      rawService({ externalIPs: ['1.2.3'] }),
      'spec.externalIPs[0]: "1.2.3" is not an IP address',
    ],
    [
      'a bad source range',
      rawService({ loadBalancerSourceRanges: ['10.0.0.0/40'] }),
      'spec.loadBalancerSourceRanges[0]: "10.0.0.0/40" is not a CIDR',
    ],
    [
      'an unknown traffic policy',
      rawService({ externalTrafficPolicy: 'Global' }),
      'spec.externalTrafficPolicy: "Global" is not Cluster or Local',
    ],
    [
      'an affinity timeout out of range',
      rawService({ sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } } }),
      'spec.sessionAffinityConfig.clientIP.timeoutSeconds: 0 is not between 1 and 86400',
    ],
    [
      'duplicate service ports',
      rawService({
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 80 },
        ],
      }),
      'spec.ports[1]: duplicate port 80/TCP (also spec.ports[0])',
    ],
    [
      'an unnamed port among several',
      rawService({ ports: [{ name: 'a', port: 80 }, { port: 81 }] }),
      'spec.ports[1].name: required when a Service has more than one port',
    ],
    [
      'a bad ingress ipMode',
      rawService({}, { status: { loadBalancer: { ingress: [{ ip: '198.51.100.1', ipMode: 'Tunnel' }] } } }),
      'status.loadBalancer.ingress[0].ipMode: "Tunnel" is not VIP or Proxy',
    ],
    [
      'a label that is not text',
      rawService({}, { metadata: { name: 'web', labels: { v: 1 } } }),
      'metadata.labels["v"]: 1 is not a string',
    ],
    ['a slice without addressType', rawSlice({ addressType: undefined }), 'addressType: missing'],
    [
      'an endpoint address of the wrong family',
      rawSlice({
        endpoints: [{ addresses: ['10.244.1.5'] }, { addresses: ['10.244.1.6'] }, { addresses: ['fd00::5'] }],
      }),
      'endpoints[2].addresses[0]: "fd00::5" is not an IPv4 address',
    ],
    [
      'an endpoint with no address',
      rawSlice({ endpoints: [{ addresses: [] }] }),
      'endpoints[0].addresses: at least one address is required',
    ],
    [
      'a condition that is not a boolean',
      rawSlice({ endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: 'yes' } }] }),
      'endpoints[0].conditions.ready: "yes" is not true or false',
    ],
    [
      'a slice port out of range',
      rawSlice({ ports: [{ name: 'http', port: 0 }] }),
      'ports[0].port: 0 is not a valid port (1-65535)',
    ],
    [
      'a bad node address',
      {
        kind: 'Node',
        metadata: { name: 'node-1' },
        status: { addresses: [{ type: 'InternalIP', address: 'node-1' }] },
      },
      'status.addresses[0].address: "node-1" is not an IP address',
    ],
    [
      'a bad pod CIDR',
      { kind: 'Node', metadata: { name: 'node-1' }, spec: { podCIDR: '10.244.1.0' } },
      'spec.podCIDR: "10.244.1.0" is not a CIDR',
    ],
    [
      'a ServiceCIDR range that is not a CIDR',
      { kind: 'ServiceCIDR', metadata: { name: 'extra' }, spec: { cidrs: ['10.96.0.0'] } },
      'spec.cidrs[0]: "10.96.0.0" is not a CIDR',
    ],
    [
      'a creation time that is not RFC 3339',
      { ...rawService(), metadata: { name: 'web', creationTimestamp: 'yesterday' } },
      'metadata.creationTimestamp: "yesterday" is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z)',
    ],
  ];
  for (const [what, raw, reason] of cases) {
    it(`rejects ${what}`, () => {
      assert.equal(reasonOf(decodeObject(raw)), reason);
    });
  }
});
