import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IntactSampler } from '../../../dataplanes/nftables/intact-check.ts';
import {
  type ExpectedObjects,
  intactCheckScript,
  intactValuesScript,
} from '../../../dataplanes/shared/nft/intact-check-script.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';

/** 100 ports of one endpoint each, one of them without endpoints. */
function state() {
  const ports = Array.from({ length: 100 }, (_, i) =>
    servicePort(`svc-${String(i).padStart(3, '0')}`, {
      clusterIP: `10.96.0.${i + 1}`,
      clusterEndpoints: i === 42 ? [] : [endpoint(`10.244.0.${i + 1}`)],
    }),
  );
  return proxyState('IPv4', ports);
}

const keys = (expected: ExpectedObjects, set: string) => [...(expected.elements.get(set)?.keys() ?? [])];

test('the fixed chains are always expected, with their rule counts, and no service port without withPorts', () => {
  const expected = new IntactSampler(10).next('ip', state(), undefined);
  assert.equal(expected.ruleCounts.get('nat-prerouting'), 1);
  assert.equal(expected.ruleCounts.get('masquerading'), 3);
  assert.equal(expected.elements.size, 0);
});

test('turns through the service ports cover every element within elements / budget checks', () => {
  const sampler = new IntactSampler(20);
  const s = state();
  const seen = new Set<string>();
  let checks = 0;
  // cluster-ips, service-ips, cluster-endpoints, backends-tcp-counts, backends-tcp per port with an
  // endpoint: ~5 a port.
  while (seen.size < 100 && checks < 30) {
    const expected = sampler.next('ip', s, new Map());
    for (const key of [...keys(expected, 'service-ips'), ...keys(expected, 'no-endpoint-services-reject')])
      seen.add(key);
    const elements = [...expected.elements.values()].reduce((n, k) => n + k.size, 0);
    assert.ok(elements <= 20 + 4 + 10, `a check names ${elements} elements: the budget plus witnesses`);
    checks++;
  }
  assert.equal(seen.size, 100, 'every port was checked');
  assert.ok(checks <= Math.ceil(500 / 20) + 1, `${checks} checks`);
});

test('a port last seen filling a set is checked every time, so a flushed set is found at once', () => {
  const sampler = new IntactSampler(20);
  const s = state();
  for (let i = 0; i < 12; i++) sampler.next('ip', s, new Map());
  // The only no-endpoint port (svc-042) has been seen: from now on every check names it.
  for (let i = 0; i < 8; i++) {
    assert.deepEqual(keys(sampler.next('ip', s, new Map()), 'no-endpoint-services-reject'), [
      '10.96.0.43 . tcp . 80',
    ]);
  }
});

test('the check script names the canary, each chain at its last rule, and the elements, for nft -c', () => {
  const script = intactCheckScript(
    [
      {
        family: 'ip',
        ruleCounts: new Map([
          ['services', 2],
          ['empty', 0],
        ]),
        elements: new Map([['service-ips', new Map([['10.96.0.1 . tcp . 80', 'goto cluster-ip']])]]),
      },
    ],
    { nonce: 7 },
  );
  assert.equal(
    script,
    'delete element ip kproxy canary { 7 }\n' +
      'delete element ip kproxy service-ips { 10.96.0.1 . tcp . 80 }\n' +
      'insert rule ip kproxy services index 1 counter\n',
  );
});

test('the values script adds each map element with its value (refused on another value), after the canary', () => {
  const expected: ExpectedObjects = {
    family: 'ip',
    ruleCounts: new Map([['services', 2]]),
    elements: new Map<string, Map<string, string | undefined>>([
      ['service-ips', new Map([['10.96.0.1 . tcp . 80', 'goto cluster-ip']])],
      ['hairpin', new Map([['10.244.0.1 . 10.244.0.1', undefined]])],
    ]),
  };
  assert.equal(
    intactValuesScript([expected], { nonce: 7 }),
    'delete element ip kproxy canary { 7 }\n' +
      'add element ip kproxy service-ips { 10.96.0.1 . tcp . 80 : goto cluster-ip }\n',
  );
  const plainSets: ExpectedObjects = {
    ...expected,
    elements: new Map([['hairpin', new Map([['10.244.0.1 . 10.244.0.1', undefined]])]]),
  };
  assert.equal(intactValuesScript([plainSets], { nonce: 7 }), undefined, 'no value to check');
});

test('interval sets are checked too: a LoadBalancer source range is named like any element', () => {
  const lb = servicePort('lb', {
    clusterIP: '10.96.0.1',
    loadBalancerIPs: ['203.0.113.1'],
    loadBalancerSourceRanges: ['10.0.0.0/8'],
    clusterEndpoints: [endpoint('10.244.0.1')],
  });
  const expected = new IntactSampler(100).next('ip', proxyState('IPv4', [lb]), new Map());
  assert.ok(keys(expected, 'firewall-allow').includes('203.0.113.1 . tcp . 80 . 10.0.0.0/8'));
});

test('each check asks a few chains, in turns, whether a rule was added: each chain within chains / 2 checks', () => {
  const sampler = new IntactSampler(10);
  const expected = sampler.next('ip', state(), undefined);
  const chains = [...expected.ruleCounts.keys()];
  const asked = new Set<string>();
  for (let i = 0; i < Math.ceil(chains.length / 2); i++) {
    const probes = sampler.extraRuleProbes(expected);
    assert.equal(probes.length, 2);
    for (const probe of probes) asked.add(probe);
  }
  assert.equal(asked.size, chains.length, 'every chain asked once');
  assert.ok(asked.has(`insert rule ip kproxy masquerading index 3 counter\n`), 'at its rule count');
});
