import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { desiredRuleset } from '../../../dataplanes/nftables/desired-ruleset.ts';
import { COUNTED_UP_TO } from '../../../dataplanes/nftables/endpoint-dispatch.ts';
import type { FamilyRuleset } from '../../../dataplanes/shared/nft/ruleset.ts';
import { endpoint, ipv4, localEndpoint, proxyState, servicePort } from './fixtures.ts';

function v4(state: DualStackState): FamilyRuleset {
  const ruleset = desiredRuleset(state).ip;
  assert.ok(ruleset, 'no ip table');
  return ruleset;
}

/** key -> value (or "" for a set element) of one set. */
function elements(ruleset: FamilyRuleset, set: string): Record<string, string> {
  return Object.fromEntries([...(ruleset.elements.get(set) ?? [])].map(([key, e]) => [key, e.value ?? '']));
}

function rules(ruleset: FamilyRuleset, chain: string): readonly string[] {
  const c = ruleset.chains.get(chain);
  assert.ok(c, `no chain ${chain}`);
  return c.rules;
}

const twoEndpoints = [endpoint('10.244.2.10'), localEndpoint('10.244.1.10')];

describe('ClusterIP', () => {
  test('a service port with endpoints goes to cluster-ip, then to the counted chain, its count in a data map', () => {
    const r = v4(ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: twoEndpoints })]));
    assert.deepEqual(elements(r, 'service-ips'), { '10.96.0.10 . tcp . 80': 'goto cluster-ip' });
    assert.deepEqual(elements(r, 'cluster-endpoints'), {
      '10.96.0.10 . tcp . 80': 'goto backends-tcp-counted',
    });
    assert.deepEqual(elements(r, 'backends-tcp-counts'), { '10.96.0.10 . 80': '2' });
    assert.deepEqual(elements(r, 'backends-tcp'), {
      '10.96.0.10 . 80 . 0': '10.244.2.10 . 8080',
      '10.96.0.10 . 80 . 1': '10.244.1.10 . 8080',
    });
    const [counted] = rules(r, 'backends-tcp-counted');
    assert.match(
      counted!,
      /^tcp dport set ip daddr \. tcp dport map @backends-tcp-counts tcp dport vmap \{ 1 : goto backends-tcp-1, 2 : goto backends-tcp-2, /,
    );
    assert.equal(
      rules(r, 'backends-tcp-2')[0],
      'meta l4proto tcp dnat ip to ip daddr . ct original proto-dst . numgen random mod 2 map @backends-tcp',
    );
    assert.deepEqual(elements(r, 'no-endpoint-services'), {});
  });

  test('the service port key is the comment of its elements', () => {
    const r = v4(ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: twoEndpoints })]));
    assert.equal(r.elements.get('service-ips')?.get('10.96.0.10 . tcp . 80')?.comment, 'default/web:80/TCP');
  });

  test('the count chains up to COUNTED_UP_TO are fixed; a count above it adds its own, shared', () => {
    const wide = (name: string, ip: string) =>
      servicePort(name, {
        clusterIP: ip,
        clusterEndpoints: Array.from({ length: COUNTED_UP_TO + 2 }, (_, i) => endpoint(`10.244.3.${i}`)),
      });
    const r = v4(ipv4([wide('a', '10.96.0.1'), wide('b', '10.96.0.2')]));
    const counts = [...r.chains.keys()].filter((c) => /^backends-tcp-\d+$/.test(c));
    assert.deepEqual(
      counts.map((c) => Number(c.slice('backends-tcp-'.length))).sort((a, b) => a - b),
      [...Array.from({ length: COUNTED_UP_TO }, (_, i) => i + 1), COUNTED_UP_TO + 2],
    );
    const over = `goto backends-tcp-${COUNTED_UP_TO + 2}`;
    assert.deepEqual(elements(r, 'cluster-endpoints'), {
      '10.96.0.1 . tcp . 80': over,
      '10.96.0.2 . tcp . 80': over,
    });
    assert.deepEqual(elements(r, 'backends-tcp-counts'), {});
  });

  test('no endpoints at all: the keys stay, without a count (no DNAT), REJECT by the set', () => {
    const r = v4(ipv4([servicePort('none', { clusterIP: '10.96.0.99', nodePort: 30099 })]));
    assert.deepEqual(elements(r, 'service-ips'), { '10.96.0.99 . tcp . 80': 'goto cluster-ip' });
    assert.deepEqual(elements(r, 'cluster-endpoints'), {
      '10.96.0.99 . tcp . 80': 'goto backends-tcp-counted',
    });
    assert.deepEqual(elements(r, 'backends-tcp-counts'), {});
    assert.deepEqual(elements(r, 'no-endpoint-services-reject'), { '10.96.0.99 . tcp . 80': '' });
    assert.deepEqual(elements(r, 'no-endpoint-nodeports-reject'), { 'tcp . 30099': '' });
    assert.deepEqual(elements(r, 'no-endpoint-services'), {});
    assert.deepEqual(elements(r, 'service-nodeports'), { 'tcp . 30099': 'goto nodeport' });
    assert.deepEqual(elements(r, 'nodeport-backends-tcp-counts'), {});
    assert.deepEqual(rules(r, 'service-endpoints-check'), [
      'ip daddr . meta l4proto . th dport @no-endpoint-services-reject reject',
      'ip daddr . meta l4proto . th dport vmap @no-endpoint-services',
    ]);
    assert.equal(r.chains.get('reject-chain'), undefined);
    // ClientIP keys name a chain per count: without endpoints they have no elements, as before.
    const sticky = v4(
      ipv4([servicePort('none', { clusterIP: '10.96.0.99', sessionAffinity: { timeoutSeconds: 60 } })]),
    );
    assert.deepEqual(elements(sticky, 'service-ips'), {});
    assert.deepEqual(elements(sticky, 'no-endpoint-services-reject'), { '10.96.0.99 . tcp . 80': '' });
  });

  test('internalTrafficPolicy Local uses the local endpoints, and DROPs when there are none', () => {
    const local = servicePort('loc', {
      clusterIP: '10.96.0.10',
      internalPolicyLocal: true,
      clusterEndpoints: twoEndpoints,
    });
    const r = v4(ipv4([local]));
    assert.deepEqual(elements(r, 'backends-tcp'), { '10.96.0.10 . 80 . 0': '10.244.1.10 . 8080' });
    const none = servicePort('loc', {
      clusterIP: '10.96.0.10',
      internalPolicyLocal: true,
      clusterEndpoints: [endpoint('10.244.2.10')],
      localEndpoints: [],
    });
    const r2 = v4(ipv4([none]));
    assert.deepEqual(elements(r2, 'backends-tcp-counts'), {});
    assert.deepEqual(elements(r2, 'no-endpoint-services'), { '10.96.0.10 . tcp . 80': 'drop' });
  });

  test('off-cluster sources are masqueraded per the detector; masqueradeAll masquerades everything', () => {
    const sp = servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: twoEndpoints });
    assert.equal(
      rules(v4(ipv4([sp])), 'cluster-ip')[0],
      'ip saddr != 10.244.0.0/16 jump mark-for-masquerade',
    );
    assert.equal(rules(v4(ipv4([sp], { masqueradeAll: true })), 'cluster-ip')[0], 'jump mark-for-masquerade');
    const byPrefix = v4(
      ipv4([sp], { localDetector: { mode: 'InterfaceNamePrefix', prefixes: ['veth', 'cali'] } }),
    );
    assert.equal(
      rules(byPrefix, 'cluster-ip')[0],
      'iifname != "veth*" iifname != "cali*" jump mark-for-masquerade',
    );
    const none = v4(ipv4([sp], { localDetector: { mode: 'None' } }));
    assert.deepEqual(rules(none, 'cluster-ip'), [
      'ip daddr . meta l4proto . th dport vmap @cluster-endpoints',
    ]);
  });
});

describe('external traffic', () => {
  const web = (overrides: Partial<Parameters<typeof servicePort>[1]>) =>
    servicePort('web', {
      clusterIP: '10.96.0.10',
      nodePort: 30080,
      externalIPs: ['192.168.5.5'],
      clusterEndpoints: twoEndpoints,
      ...overrides,
    });

  test('policy Cluster: external IPs and node ports masquerade and use all endpoints', () => {
    const r = v4(ipv4([web({})]));
    assert.equal(elements(r, 'service-ips')['192.168.5.5 . tcp . 80'], 'goto external');
    assert.equal(elements(r, 'service-nodeports')['tcp . 30080'], 'goto nodeport');
    assert.equal(
      elements(r, 'nodeport-cluster-endpoints')['tcp . 30080'],
      'goto nodeport-backends-tcp-counted',
    );
    assert.deepEqual(rules(r, 'external')[0], 'jump mark-for-masquerade');
  });

  test('policy Local: local endpoints for outside traffic, all endpoints for the pod/host short-circuit', () => {
    const r = v4(ipv4([web({ externalPolicyLocal: true })]));
    assert.equal(elements(r, 'service-ips')['192.168.5.5 . tcp . 80'], 'goto external-local');
    assert.equal(elements(r, 'cluster-endpoints')['192.168.5.5 . tcp . 80'], 'goto backends-tcp-counted');
    assert.equal(elements(r, 'backends-tcp-counts')['192.168.5.5 . 80'], '2');
    assert.equal(elements(r, 'local-endpoints')['192.168.5.5 . tcp . 80'], 'goto local-backends-tcp-counted');
    assert.equal(elements(r, 'local-backends-tcp-counts')['192.168.5.5 . 80'], '1');
    assert.equal(elements(r, 'nodeport-local-backends-tcp-counts')['30080'], '1');
    assert.equal(
      rules(r, 'nodeport-local-backends-tcp-1')[0],
      'meta l4proto tcp dnat ip to ct original proto-dst . numgen random mod 1 map @nodeport-local-backends-tcp',
    );
    assert.deepEqual(rules(r, 'external-local'), [
      'ip saddr 10.244.0.0/16 ip daddr . meta l4proto . th dport vmap @cluster-endpoints',
      'fib saddr type local jump mark-for-masquerade',
      'fib saddr type local ip daddr . meta l4proto . th dport vmap @cluster-endpoints',
      'ip daddr . meta l4proto . th dport vmap @local-endpoints',
    ]);
  });

  test('policy Local without local endpoints: short-circuit kept, outside traffic DROPped', () => {
    const r = v4(ipv4([web({ externalPolicyLocal: true, clusterEndpoints: [endpoint('10.244.2.10')] })]));
    assert.equal(elements(r, 'service-ips')['192.168.5.5 . tcp . 80'], 'goto external-local');
    assert.equal(elements(r, 'no-endpoint-services')['192.168.5.5 . tcp . 80'], 'drop');
    assert.equal(elements(r, 'no-endpoint-nodeports')['tcp . 30080'], 'drop');
    assert.equal(elements(r, 'local-endpoints')['192.168.5.5 . tcp . 80'], 'goto local-backends-tcp-counted');
    assert.deepEqual(elements(r, 'local-backends-tcp-counts'), {});
  });

  test('LoadBalancer source ranges fill the firewall sets; LB IPs are allowed when a range holds the node', () => {
    const lb = (ranges: string[]) =>
      v4(ipv4([web({ loadBalancerIPs: ['192.168.6.6'], loadBalancerSourceRanges: ranges })]));
    assert.deepEqual(elements(lb(['203.0.113.0/24']), 'firewall-ips'), { '192.168.6.6 . tcp . 80': '' });
    assert.deepEqual(Object.keys(elements(lb(['203.0.113.0/24']), 'firewall-allow')), [
      '192.168.6.6 . tcp . 80 . 203.0.113.0/24',
    ]);
    assert.deepEqual(Object.keys(elements(lb(['10.100.0.0/24']), 'firewall-allow')), [
      '192.168.6.6 . tcp . 80 . 10.100.0.0/24',
      '192.168.6.6 . tcp . 80 . 192.168.6.6',
    ]);
    assert.deepEqual(elements(lb([]), 'firewall-ips'), {});
  });

  test('node ports on all local addresses, or only on the node addresses in nodePortAddresses', () => {
    const all = v4(ipv4([web({})]));
    assert.match(rules(all, 'services')[1]!, /^fib daddr type local ip daddr != 127\.0\.0\.0\/8 /);
    const limited = v4(
      ipv4([web({})], { nodeIPs: ['10.100.0.11', '172.16.0.1'], nodePortAddresses: ['10.100.0.0/24'] }),
    );
    assert.match(rules(limited, 'services')[1]!, /^ip daddr @nodeport-ips /);
    assert.deepEqual(elements(limited, 'nodeport-ips'), { '10.100.0.11': '' });
  });
});

describe('session affinity, hairpin, families', () => {
  test('ClientIP affinity: endpoints in the fixed affinity maps, a count chain, a timeout chain', () => {
    // `mixed`: its endpoints on two ports (a named target port), so address . port per endpoint.
    const mixedEndpoints = [twoEndpoints[0]!, { ...twoEndpoints[1]!, port: 9090 }];
    const r = v4(
      ipv4([
        servicePort('web', {
          clusterIP: '10.96.0.10',
          clusterEndpoints: twoEndpoints,
          sessionAffinity: { timeoutSeconds: 60 },
        }),
        servicePort('mixed', {
          clusterIP: '10.96.0.11',
          clusterEndpoints: mixedEndpoints,
          sessionAffinity: { timeoutSeconds: 60 },
        }),
      ]),
    );
    assert.equal(elements(r, 'cluster-endpoints')['10.96.0.10 . tcp . 80'], 'goto affinity-backends-tcp-2');
    assert.equal(
      elements(r, 'cluster-endpoints')['10.96.0.11 . tcp . 80'],
      'goto affinity-backends-tcp-2-mixed',
    );
    // One element per endpoint when they share a port (as without affinity), and the key's port.
    assert.deepEqual(elements(r, 'affinity-backends-ips'), {
      '10.96.0.10 . tcp . 80 . 0': twoEndpoints[0]!.ip,
      '10.96.0.10 . tcp . 80 . 1': twoEndpoints[1]!.ip,
      '10.96.0.11 . tcp . 80 . 0': twoEndpoints[0]!.ip,
      '10.96.0.11 . tcp . 80 . 1': twoEndpoints[1]!.ip,
    });
    assert.deepEqual(elements(r, 'affinity-backends-ports'), { '10.96.0.10 . tcp . 80': '8080' });
    assert.deepEqual(elements(r, 'affinity-backends'), {
      '10.96.0.11 . tcp . 80 . 0': `${twoEndpoints[0]!.ip} . 8080`,
      '10.96.0.11 . tcp . 80 . 1': `${twoEndpoints[1]!.ip} . 9090`,
    });
    assert.deepEqual(elements(r, 'affinity-timeouts'), {
      '10.96.0.10 . tcp . 80': 'goto affinity-record-60',
      '10.96.0.11 . tcp . 80': 'goto affinity-record-60',
    });
    assert.deepEqual(elements(r, 'backends-tcp'), {});
    // The checks of the count's bucket (one per index: the client remembered with endpoint i),
    // then the random pick.
    const [checks, pick] = rules(r, 'affinity-backends-tcp-2');
    assert.equal(checks, 'jump affinity-backends-tcp-remembered-2');
    const [first, second] = rules(r, 'affinity-backends-tcp-remembered-2');
    assert.match(
      first!,
      /^meta l4proto tcp tcp dport set 0 ip daddr set .* map @affinity-backends-ips .* @affinity-clients dnat ip to ip daddr : .* map @affinity-backends-ports$/,
    );
    assert.match(second!, /tcp dport set 1 /);
    assert.match(
      pick!,
      /tcp dport set numgen random mod 2 map \{ 0 : 0, 1 : 1 \} ip daddr set .* map @affinity-backends-ips dnat ip to ip daddr : /,
    );
    const [mixedChecks, mixedPick] = rules(r, 'affinity-backends-tcp-2-mixed');
    assert.equal(mixedChecks, 'jump affinity-backends-tcp-remembered-2-mixed');
    assert.match(
      rules(r, 'affinity-backends-tcp-remembered-2-mixed')[0]!,
      /tcp dport set 0 .* @affinity-clients dnat ip to .* tcp dport map @affinity-backends$/,
    );
    assert.match(mixedPick!, /numgen random mod 2 .* dnat ip to .* tcp dport map @affinity-backends$/);
    assert.match(rules(r, 'affinity-record-60')[0]!, /update @affinity-clients \{ .* timeout 60s \}$/);
  });

  test('affinity adds no set or map per service: the same sets for one ClientIP port or many', () => {
    const ports = (n: number) =>
      Array.from({ length: n }, (_, i) =>
        servicePort(`w${i}`, {
          clusterIP: `10.96.0.${i + 1}`,
          clusterEndpoints: twoEndpoints,
          sessionAffinity: { timeoutSeconds: 60 + (i % 2) },
        }),
      );
    const one = v4(ipv4(ports(1)));
    const many = v4(ipv4(ports(20)));
    assert.deepEqual([...many.sets.keys()], [...one.sets.keys()]);
    // Chains: one per distinct timeout, not per service.
    assert.deepEqual(
      [...many.chains.keys()].filter((c) => c.startsWith('affinity-record-')),
      ['affinity-record-60', 'affinity-record-61'],
    );
  });

  test('every local endpoint is in the hairpin set, remote ones are not', () => {
    const r = v4(ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: twoEndpoints })]));
    assert.deepEqual(elements(r, 'hairpin'), { '10.244.1.10 . 10.244.1.10': '' });
  });

  test('IPv6 renders into the ip6 table with ip6 matches; absent families have no table', () => {
    const state = {
      IPv6: proxyState('IPv6', [
        servicePort('web', { clusterIP: 'fd00:96::10', clusterEndpoints: [endpoint('fd00:244:2::10')] }),
      ]),
    };
    const desired = desiredRuleset(state);
    assert.equal(desired.ip, undefined);
    assert.deepEqual(Object.keys(Object.fromEntries(desired.ip6!.elements.get('backends-tcp')!)), [
      'fd00:96::10 . 80 . 0',
    ]);
    assert.match(desired.ip6!.chains.get('backends-tcp-1')!.rules[0]!, /dnat ip6 to ip6 daddr/);
  });
});
