import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { build, portOf, service } from './fixtures.ts';

const DUAL = { nodeIPs: ['192.168.0.1', 'fd00::1'] };

describe('which services are proxied', () => {
  const cases = [
    { why: 'headless (clusterIP None)', svc: service('web', { clusterIP: 'None' }) },
    { why: 'without a cluster IP', svc: service('web', { clusterIP: '' }) },
    {
      why: 'ExternalName',
      svc: service('web', { type: 'ExternalName', clusterIP: '', externalName: 'example.com' }),
    },
    {
      why: 'labelled for another proxy',
      svc: service('web', {}, { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
    },
    {
      why: 'labelled for another proxy with an empty value',
      svc: service('web', {}, { labels: { 'service.kubernetes.io/service-proxy-name': '' } }),
    },
    {
      why: 'labelled headless',
      svc: service('web', {}, { labels: { 'service.kubernetes.io/headless': '' } }),
    },
  ];
  for (const { why, svc } of cases) {
    it(`skips a service ${why}`, () => {
      assert.equal(build([svc]).state.IPv4?.servicePorts.size, 0);
    });
  }

  it('proxies an ordinary ClusterIP service', () => {
    assert.equal(build([service('web')]).state.IPv4?.servicePorts.size, 1);
  });
});

describe('service port identity', () => {
  it('creates one service port per spec.ports entry keyed namespace/name:port/PROTOCOL', () => {
    const dns = service(
      'kube-dns',
      {
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP' },
          { name: 'dns-tcp', port: 53, protocol: 'TCP' },
          { name: 'sctp', port: 9999, protocol: 'SCTP' },
        ],
      },
      { namespace: 'kube-system' },
    );
    const ports = build([dns]).state.IPv4!.servicePorts;
    assert.deepEqual(
      [...ports.keys()],
      ['kube-system/kube-dns:53/TCP', 'kube-system/kube-dns:53/UDP', 'kube-system/kube-dns:9999/SCTP'],
    );
    const udp = ports.get('kube-system/kube-dns:53/UDP')!;
    assert.equal(udp.portName, 'dns');
    assert.equal(udp.protocol, 'UDP');
    assert.equal(udp.namespace, 'kube-system');
    assert.equal(udp.name, 'kube-dns');
  });

  it('defaults the protocol to TCP and the port name to ""', () => {
    const port = portOf(build([service('web', { ports: [{ port: 8080 }] })]), 'default/web:8080/TCP');
    assert.equal(port.protocol, 'TCP');
    assert.equal(port.portName, '');
  });
});

describe('cluster IPs per family', () => {
  it('puts a dual-stack service in both families with that family’s cluster IP', () => {
    const out = build(
      [service('web', { clusterIPs: ['10.96.0.10', 'fd00:96::10'], ipFamilies: ['IPv4', 'IPv6'] })],
      DUAL,
    );
    assert.equal(portOf(out, 'default/web:80/TCP', 'IPv4').clusterIP, '10.96.0.10');
    assert.equal(portOf(out, 'default/web:80/TCP', 'IPv6').clusterIP, 'fd00:96::10');
  });

  it('puts an IPv6-only service only in the IPv6 state', () => {
    const out = build([service('web', { clusterIP: 'fd00:96::10' })], DUAL);
    assert.equal(out.state.IPv4?.servicePorts.size, 0);
    assert.equal(portOf(out, 'default/web:80/TCP', 'IPv6').clusterIP, 'fd00:96::10');
  });

  it('falls back to spec.clusterIP when clusterIPs is absent', () => {
    assert.equal(
      portOf(build([service('web', { clusterIP: '10.96.1.1' })]), 'default/web:80/TCP').clusterIP,
      '10.96.1.1',
    );
  });

  it('stores cluster IPs in canonical form', () => {
    const out = build([service('web', { clusterIP: 'FD00:96:0:0::0010' })], DUAL);
    assert.equal(portOf(out, 'default/web:80/TCP', 'IPv6').clusterIP, 'fd00:96::10');
  });
});

describe('node ports', () => {
  for (const type of ['NodePort', 'LoadBalancer']) {
    it(`keeps the node port of a ${type} service`, () => {
      const svc = service('web', { type, ports: [{ name: 'http', port: 80, nodePort: 30080 }] });
      assert.equal(portOf(build([svc]), 'default/web:80/TCP').nodePort, 30080);
    });
  }

  it('ignores a stale node port on a ClusterIP service', () => {
    const svc = service('web', { ports: [{ name: 'http', port: 80, nodePort: 30080 }] });
    assert.equal(portOf(build([svc]), 'default/web:80/TCP').nodePort, 0);
  });
});

describe('external and load balancer IPs', () => {
  it('splits externalIPs by family', () => {
    const svc = service('web', {
      clusterIPs: ['10.96.0.10', 'fd00:96::10'],
      externalIPs: ['203.0.113.7', '2001:db8::7', '203.0.113.8'],
    });
    const out = build([svc], DUAL);
    assert.deepEqual(portOf(out, 'default/web:80/TCP', 'IPv4').externalIPs, ['203.0.113.7', '203.0.113.8']);
    assert.deepEqual(portOf(out, 'default/web:80/TCP', 'IPv6').externalIPs, ['2001:db8::7']);
  });

  it('uses VIP ingress IPs of a LoadBalancer, skipping ipMode Proxy and hostname-only entries', () => {
    const svc = service(
      'web',
      { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, nodePort: 30080 }] },
      {
        ingress: [
          { ip: '198.51.100.1' },
          { ip: '198.51.100.2', ipMode: 'VIP' },
          { ip: '198.51.100.3', ipMode: 'Proxy' },
          { hostname: 'lb.example.com' },
        ],
      },
    );
    assert.deepEqual(portOf(build([svc]), 'default/web:80/TCP').loadBalancerIPs, [
      '198.51.100.1',
      '198.51.100.2',
    ]);
  });

  it('ignores ingress IPs on a service that is not a LoadBalancer', () => {
    const svc = service('web', { type: 'NodePort' }, { ingress: [{ ip: '198.51.100.1' }] });
    assert.deepEqual(portOf(build([svc]), 'default/web:80/TCP').loadBalancerIPs, []);
  });

  it('keeps loadBalancerSourceRanges of the family, trimmed and canonical', () => {
    const svc = service('web', {
      type: 'LoadBalancer',
      clusterIPs: ['10.96.0.10', 'fd00:96::10'],
      loadBalancerSourceRanges: [' 192.0.2.0/24 ', '2001:db8::/32', '10.1.2.3/8'],
    });
    const out = build([svc], DUAL);
    assert.deepEqual(portOf(out, 'default/web:80/TCP', 'IPv4').loadBalancerSourceRanges, [
      '192.0.2.0/24',
      '10.0.0.0/8',
    ]);
    assert.deepEqual(portOf(out, 'default/web:80/TCP', 'IPv6').loadBalancerSourceRanges, ['2001:db8::/32']);
  });
});

describe('session affinity', () => {
  it('has no affinity by default', () => {
    assert.equal(portOf(build([service('web')]), 'default/web:80/TCP').sessionAffinity, undefined);
  });

  it('defaults the ClientIP timeout to 10800 seconds', () => {
    const port = portOf(build([service('web', { sessionAffinity: 'ClientIP' })]), 'default/web:80/TCP');
    assert.deepEqual(port.sessionAffinity, { timeoutSeconds: 10800 });
  });

  it('uses the configured ClientIP timeout', () => {
    const svc = service('web', {
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    });
    assert.deepEqual(portOf(build([svc]), 'default/web:80/TCP').sessionAffinity, { timeoutSeconds: 60 });
  });
});

describe('traffic policies', () => {
  const cases = [
    { type: 'NodePort', extra: {}, want: true },
    { type: 'LoadBalancer', extra: {}, want: true },
    { type: 'ClusterIP', extra: { externalIPs: ['203.0.113.7'] }, want: true },
    { type: 'ClusterIP', extra: {}, want: false },
  ];
  for (const { type, extra, want } of cases) {
    const what = 'externalIPs' in extra ? `${type} with externalIPs` : type;
    it(`externalTrafficPolicy Local on ${what} ${want ? 'counts' : 'does not count'}`, () => {
      const svc = service('web', { type, externalTrafficPolicy: 'Local', ...extra });
      assert.equal(portOf(build([svc]), 'default/web:80/TCP').externalPolicyLocal, want);
    });
  }

  it('records internalTrafficPolicy Local', () => {
    const svc = service('web', { internalTrafficPolicy: 'Local' });
    assert.equal(portOf(build([svc]), 'default/web:80/TCP').internalPolicyLocal, true);
    assert.equal(portOf(build([service('web')]), 'default/web:80/TCP').internalPolicyLocal, false);
  });

  it('keeps healthCheckNodePort only for a LoadBalancer with externalTrafficPolicy Local', () => {
    const lb = { type: 'LoadBalancer', healthCheckNodePort: 32000 };
    assert.equal(
      portOf(build([service('web', { ...lb, externalTrafficPolicy: 'Local' })]), 'default/web:80/TCP')
        .healthCheckNodePort,
      32000,
    );
    assert.equal(
      portOf(build([service('web', { ...lb, externalTrafficPolicy: 'Cluster' })]), 'default/web:80/TCP')
        .healthCheckNodePort,
      0,
    );
    const nodePort = { type: 'NodePort', healthCheckNodePort: 32000, externalTrafficPolicy: 'Local' };
    assert.equal(portOf(build([service('web', nodePort)]), 'default/web:80/TCP').healthCheckNodePort, 0);
  });
});
