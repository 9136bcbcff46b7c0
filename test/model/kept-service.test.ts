import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Service } from '../../src/kube/objects.ts';
import { serviceKey } from '../../src/model/build-state.ts';
import { keptService, type ProxiedService } from '../../src/model/kept-service.ts';
import { servicePortsOfFamily } from '../../src/model/service-ports.ts';
import { service } from './fixtures.ts';

/** Every field of the decoded Service, side by side: what the model would read without the copy. */
function whole(service: Service): ProxiedService {
  const key = serviceKey(service);
  return { key, ...service.metadata, ...service.spec, ...(service.status && { status: service.status }) };
}

describe('keptService', () => {
  // Every field servicePortsOfFamily reads set to other than its default, in both families: a
  // field the copy forgot changes a port.
  const cases = {
    'a dual-stack LoadBalancer with every field set': service(
      'web',
      {
        type: 'LoadBalancer',
        clusterIP: '10.96.0.10',
        clusterIPs: ['10.96.0.10', 'fd00::10'],
        ipFamilies: ['IPv4', 'IPv6'],
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 },
          { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30053 },
        ],
        externalIPs: ['192.0.2.1', '2001:db8::1'],
        loadBalancerSourceRanges: ['198.51.100.0/24', '2001:db8:1::/48'],
        externalTrafficPolicy: 'Local',
        internalTrafficPolicy: 'Local',
        healthCheckNodePort: 32000,
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
      },
      { namespace: 'shop', ingress: [{ ip: '203.0.113.1' }, { ip: '2001:db8::2', ipMode: 'VIP' }] },
    ),
    'an IPv6 service whose clusterIPs repeat clusterIP': service('v6', {
      clusterIP: 'fd00::20',
      clusterIPs: ['fd00::20'],
    }),
    'a service labelled for another proxy': service(
      'other',
      {},
      { labels: { 'service.kubernetes.io/service-proxy-name': 'else' } },
    ),
  };
  for (const [why, svc] of Object.entries(cases)) {
    it(`gives the ports of the decoded Service: ${why}`, () => {
      const kept = keptService(svc, serviceKey(svc));
      for (const family of ['IPv4', 'IPv6'] as const) {
        assert.deepEqual(
          servicePortsOfFamily(kept, family),
          servicePortsOfFamily(whole(svc), family),
          family,
        );
        assert.deepEqual(
          servicePortsOfFamily(kept, family, 'else'),
          servicePortsOfFamily(whole(svc), family, 'else'),
          `${family}, --service-proxy-name else`,
        );
      }
    });
  }

  it('keeps the creation time and leaves out the resourceVersion and a clusterIPs of clusterIP alone', () => {
    const svc = service('web', { clusterIPs: ['10.96.0.10'] });
    const decoded = {
      ...svc,
      metadata: { ...svc.metadata, resourceVersion: '42', creationTimestamp: 1700000000 },
    };
    const kept = keptService(decoded, 'default/web');
    assert.equal(kept.creationTimestamp, 1700000000);
    assert.equal('resourceVersion' in kept, false);
    assert.equal(kept.clusterIPs, undefined);
    assert.equal(kept.clusterIP, '10.96.0.10');
  });
});
