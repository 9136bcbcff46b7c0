// KPROXY-SERVICES's dispatch tree (dataplanes/iptables/service-dispatch.ts): a packet to any Service
// address meets a bounded number of rules on its way to its Service's chain, traced through the
// rendered rules, and a change of one Service's addresses rewrites only the tree chains it is in.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProxyState, ServicePort } from '../../../contract/proxy-state.ts';
import { serviceChainNames } from '../../../dataplanes/iptables/chain-names.ts';
import { planFamilyFull, planFamilyIncremental } from '../../../dataplanes/iptables/planner.ts';
import { renderPlan } from '../../../dataplanes/iptables/restore-plan.ts';
import { traceIptables } from '../../../dataplanes/iptables/trace.ts';
import { parseIptablesRuleset } from '../../../dataplanes/iptables/trace-ruleset.ts';
import { hostPort, type TracePacket } from '../../../dataplanes/shared/trace/packet.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';

const NODE = { localAddresses: ['192.168.0.2', 'fd00:192::2'] };

function address(family: 'IPv4' | 'IPv6', i: number): string {
  return family === 'IPv4' ? `10.96.${i >> 8}.${i & 255}` : `fd00:96::${i.toString(16)}`;
}

function service(family: 'IPv4' | 'IPv6', i: number, overrides: Partial<ServicePort> = {}): ServicePort {
  const pod = family === 'IPv4' ? `10.244.${i >> 8}.${i & 255}` : `fd00:244::${i.toString(16)}`;
  return servicePort(`svc${i}`, {
    clusterIP: address(family, i),
    clusterEndpoints: [endpoint(pod, 8080)],
    ...overrides,
  });
}

/** `count` services with consecutive cluster IPs, a few with external IPs among the cluster IPs' low bits. */
function services(family: 'IPv4' | 'IPv6', count: number): ServicePort[] {
  return Array.from({ length: count }, (_, i) =>
    service(family, i, i % 500 === 7 ? { externalIPs: [address(family, count + i)] } : {}),
  );
}

function packetTo(destination: string): TracePacket {
  const source = destination.includes(':') ? 'fd00:192::2' : '192.168.0.2';
  return { source, sourcePort: 40000, destination, port: 80, protocol: 'tcp', via: 'node' };
}

/** The rules per nat chain of a rendered full plan. */
function natChains(state: ProxyState): Map<string, number> {
  const tables = parseIptablesRuleset(renderPlan({ kind: 'full', [state.family]: planFamilyFull(state) }));
  const nat = tables[state.family].get('nat')!;
  return new Map([...nat].map(([chain, { rules }]) => [chain, rules.length]));
}

for (const family of ['IPv4', 'IPv6'] as const) {
  test(`${family}: every address of 2,000 services reaches its own Service chain through two bucket chains of at most 32 jumps each`, () => {
    const ports = services(family, 2000);
    const state = proxyState(family, ports);
    const ruleset = parseIptablesRuleset(renderPlan({ kind: 'full', [family]: planFamilyFull(state) }));
    for (const sp of ports) {
      for (const [destination, target] of [
        [sp.clusterIP, serviceChainNames(sp).cluster],
        ...sp.externalIPs.map((ip) => [ip, serviceChainNames(sp).external] as const),
      ] as const) {
        const [branch, ...others] = traceIptables(ruleset, packetTo(destination), NODE).branches;
        assert.equal(others.length, 0, `${destination}: one endpoint, one branch`);
        const entered = branch!.steps.filter((s) => s.kind === 'chain').map((s) => s.chain);
        const buckets = entered.filter((chain) => chain.startsWith('KPROXY-SVB-'));
        assert.deepEqual(
          buckets.map((chain) => chain.split('-')[2]),
          ['1', '2'],
          `${destination} entered ${entered.join(' ')}`,
        );
        assert.ok(entered.includes(target), `${destination} entered ${entered.join(' ')}, not ${target}`);
        const { outcome } = branch!;
        assert.equal(
          outcome.kind === 'dnat' && outcome.endpoint,
          hostPort(sp.clusterEndpoints.at(0)!.ip, 8080),
        );
      }
    }
    // What a packet walks past: KPROXY-SERVICES and a first-level chain, at most 32 jumps each (and
    // the node port jump); a leaf holds the addresses sharing its low 10 bits, 2 of 2,000 here.
    const chains = natChains(state);
    assert.ok(chains.get('KPROXY-SERVICES')! <= 33);
    for (const [chain, rules] of chains) {
      if (chain.startsWith('KPROXY-SVB-1-')) assert.ok(rules <= 32, `${chain}: ${rules} rules`);
      if (chain.startsWith('KPROXY-SVB-2-')) assert.ok(rules <= 3, `${chain}: ${rules} rules`);
    }
  });
}

test('a Service added, its address changed or removed rewrites only its own chains and the bucket chains it is in', () => {
  const ports = services('IPv4', 3000);
  const before = proxyState('IPv4', ports);
  const nat = (prev: ProxyState, next: ProxyState) => {
    const table = planFamilyIncremental(prev, next)!.tables.find((t) => t.table === 'nat')!;
    return {
      buckets: [...table.chains.keys()].filter((chain) => !/^KPROXY-(SVC|TEP)-/.test(chain)).sort(),
      deleted: table.deleted.filter((chain) => chain.startsWith('KPROXY-SVB-')).sort(),
    };
  };
  // 10.96.11.184: low 10 bits 0x3B8, shared with 10.96.3.184 and 10.96.7.184: its leaf exists.
  const added = proxyState('IPv4', [...ports, service('IPv4', 3000)]);
  assert.deepEqual(nat(before, added), { buckets: ['KPROXY-SVB-2-3B8'], deleted: [] });
  // 10.97.0.0 (low bits 0, a leaf that 10.96.0.0, .4.0 and .8.0 share): moved there from 0x3B8.
  const moved = proxyState('IPv4', [...ports, service('IPv4', 3000, { clusterIP: '10.97.0.0' })]);
  assert.deepEqual(nat(added, moved), { buckets: ['KPROXY-SVB-2-000', 'KPROXY-SVB-2-3B8'], deleted: [] });
  // A leaf of its own: 10.98.0.1 is alone among 0x001's addresses once svc1, svc1025, svc2049 go.
  const alone = proxyState('IPv4', [
    ...ports.filter((_, i) => i % 1024 !== 1),
    service('IPv4', 3000, { clusterIP: '10.98.0.1' }),
  ]);
  const without = proxyState(
    'IPv4',
    ports.filter((_, i) => i % 1024 !== 1),
  );
  assert.deepEqual(nat(without, alone), { buckets: ['KPROXY-SVB-1-01', 'KPROXY-SVB-2-001'], deleted: [] });
  assert.deepEqual(nat(alone, without), { buckets: ['KPROXY-SVB-1-01'], deleted: ['KPROXY-SVB-2-001'] });
  // An endpoint change touches no bucket chain.
  const endpointMoved = proxyState('IPv4', [
    ...ports.slice(1),
    service('IPv4', 0, { clusterEndpoints: [endpoint('10.244.99.1', 8080)] }),
  ]);
  assert.deepEqual(nat(before, endpointMoved), { buckets: [], deleted: [] });
});
