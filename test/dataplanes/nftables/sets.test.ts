// The set declarations (sets.ts) against the table and against what service ports write: a set
// the table makes without a declaration, or whose role is wrong for what ports write there, would
// break the fast path of incremental syncs (fragment-index.ts) or a ruleset built in pieces
// (cold-start.ts) only when such a state came along.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { familySets } from '../../../dataplanes/nftables/base-objects.ts';
import { addServicePort } from '../../../dataplanes/nftables/service-port.ts';
import { ALL_SETS, CROSS_PORT_SETS, type NftSet } from '../../../dataplanes/nftables/sets.ts';
import { familySyntax } from '../../../dataplanes/shared/nft/family-syntax.ts';
import { RulesetBuilder } from '../../../dataplanes/shared/nft/ruleset.ts';
import type { ElementSpec } from '../../../dataplanes/shared/nft/transaction.ts';
import { endpoint, ipv4, localEndpoint, servicePort } from './fixtures.ts';
import { goldenStates } from './golden-states.ts';

const declared = new Map<string, NftSet>(ALL_SETS.map((set) => [set.name, set]));

test('the table makes every declared set, and none other', () => {
  for (const ipFamily of ['IPv4', 'IPv6'] as const) {
    const made = familySets(familySyntax(ipFamily)).map((set) => set.name);
    assert.deepEqual([...made].sort(), [...declared.keys()].sort(), ipFamily);
  }
});

const pods = [endpoint('10.244.2.10'), localEndpoint('10.244.1.10'), localEndpoint('10.244.1.11')];

/**
 * Ports that share what ports can share: two ports of one Service (its cluster IP), local
 * endpoints behind several Services (hairpin pairs), with every kind of key and element beside.
 */
const sharing = ipv4([
  servicePort('web', {
    clusterIP: '10.96.0.10',
    port: 80,
    nodePort: 30080,
    loadBalancerIPs: ['192.168.6.6'],
    loadBalancerSourceRanges: ['10.100.0.0/24'],
    externalPolicyLocal: true,
    clusterEndpoints: pods,
  }),
  servicePort('web', {
    clusterIP: '10.96.0.10',
    port: 443,
    nodePort: 30443,
    externalIPs: ['192.168.5.5'],
    clusterEndpoints: pods,
    sessionAffinity: { timeoutSeconds: 600 },
  }),
  servicePort('api', { clusterIP: '10.96.0.11', internalPolicyLocal: true, clusterEndpoints: pods }),
  servicePort('gone', { clusterIP: '10.96.0.12', nodePort: 30012, externalPolicyLocal: true }),
]);

/** Each port's elements by set, as the fast path builds a port's fragment. */
function portElements(state: DualStackState) {
  const out: { port: string; set: string; element: ElementSpec }[] = [];
  for (const familyState of [state.IPv4, state.IPv6]) {
    if (!familyState) continue;
    const syntax = familySyntax(familyState.family);
    for (const sp of familyState.servicePorts.values()) {
      const builder = new RulesetBuilder(syntax.family, { open: true });
      addServicePort(builder, syntax, familyState.node, sp);
      for (const [set, elements] of builder.drain(new Set()).elements) {
        for (const element of elements.values())
          out.push({ port: `${syntax.family} ${sp.key}`, set: `${syntax.family} ${set}`, element });
      }
    }
  }
  return out;
}

for (const [name, state] of [['sharing', sharing] as const, ...Object.entries(goldenStates)]) {
  test(`${name}: a key two service ports write is in a shared set, spelled alike; every set a port writes is declared for ports`, () => {
    const writers = new Map<string, { port: string; element: ElementSpec }>();
    for (const { port, set, element } of portElements(state)) {
      const name = set.slice(set.indexOf(' ') + 1);
      const role = declared.get(name)?.role.kind;
      assert.ok(role !== undefined && role !== 'node', `a service port writes ${name}, declared ${role}`);
      const id = `${set} ${element.key}`;
      const first = writers.get(id);
      writers.set(id, { port, element });
      if (first === undefined || first.port === port) continue;
      assert.equal(role, 'shared', `${first.port} and ${port} both write ${id}`);
      assert.deepEqual(element, first.element, `${id}: the fast path counts one spelling`);
      assert.ok(CROSS_PORT_SETS.has(name), `${name}: a ruleset built in pieces must remember it`);
    }
  });
}

test('the sharing state shares a cluster IP and hairpin pairs (what the roles test relies on)', () => {
  const shared = new Map<string, Set<string>>();
  for (const { port, set, element } of portElements(sharing)) {
    const id = `${set} ${element.key}`;
    shared.set(id, (shared.get(id) ?? new Set()).add(port));
  }
  const byMany = [...shared].filter(([, ports]) => ports.size > 1).map(([id]) => id);
  assert.ok(byMany.includes('ip cluster-ips 10.96.0.10'), byMany.join('\n'));
  assert.ok(byMany.includes('ip hairpin 10.244.1.10 . 10.244.1.10'), byMany.join('\n'));
});
