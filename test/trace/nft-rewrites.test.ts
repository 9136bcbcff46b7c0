// Rules that rewrite the packet before they decide (`tcp dport set`, `ip daddr set … map`) and
// read conntrack's original destination (`ct original ip daddr`, `ct original proto-dst`): the
// tracer follows the rewritten packet, and a rewrite stays when the rest of its rule fails.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { traceNftables } from '../../dataplanes/shared/trace/nft.ts';
import { parseNftRuleset } from '../../dataplanes/shared/trace/nft-ruleset.ts';
import type { TracePacket } from '../../dataplanes/shared/trace/packet.ts';

const SERVICE = 'ct original ip daddr . ct original proto-dst';
const CLIENT_KEY = 'ip saddr . ct original ip daddr . meta l4proto . ct original proto-dst . ip daddr';
const remembered = (i: number) =>
  `add rule ip kproxy pick meta l4proto tcp tcp dport set ${i} ip daddr set ${SERVICE} . tcp dport map @aff-ips ` +
  `${CLIENT_KEY} @clients dnat ip to ${SERVICE} . tcp dport map @aff`;

/** A ClientIP pick: the remembered endpoint of this client if any, else one at random, recorded. */
function ruleset(clients: readonly string[]): string {
  return [
    'add table ip kproxy',
    'add map ip kproxy aff { type ipv4_addr . inet_service . inet_service : ipv4_addr . inet_service ; }',
    'add map ip kproxy aff-ips { type ipv4_addr . inet_service . inet_service : ipv4_addr ; }',
    'add set ip kproxy clients { type ipv4_addr . ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags dynamic,timeout ; timeout 1h ; }',
    'add chain ip kproxy nat-prerouting { type nat hook prerouting priority dstnat ; }',
    'add chain ip kproxy nat-postrouting { type nat hook postrouting priority srcnat ; }',
    'add chain ip kproxy pick { comment "ns/sticky:80/TCP ClientIP" ; }',
    'add rule ip kproxy nat-prerouting ip daddr 10.96.0.5 tcp dport 80 goto pick',
    remembered(0),
    remembered(1),
    `add rule ip kproxy pick meta l4proto tcp ip daddr set ct original ip daddr tcp dport set numgen random mod 2 map { 0 : 0, 1 : 1 } dnat ip to ${SERVICE} . tcp dport map @aff`,
    `add rule ip kproxy nat-postrouting ct status dnat update @clients { ${CLIENT_KEY} timeout 600s }`,
    'add element ip kproxy aff { 10.96.0.5 . 80 . 0 : 10.1.0.1 . 8080, 10.96.0.5 . 80 . 1 : 10.1.0.2 . 8080 }',
    'add element ip kproxy aff-ips { 10.96.0.5 . 80 . 0 : 10.1.0.1, 10.96.0.5 . 80 . 1 : 10.1.0.2 }',
    ...(clients.length > 0 ? [`add element ip kproxy clients { ${clients.join(', ')} }`] : []),
    '',
  ].join('\n');
}

const PACKET: TracePacket = {
  source: '10.0.0.7',
  sourcePort: 40000,
  destination: '10.96.0.5',
  port: 80,
  protocol: 'tcp',
  via: 'external',
};
const HOST = { localAddresses: ['192.168.0.2'] };

function trace(clients: readonly string[]) {
  const report = traceNftables(parseNftRuleset(ruleset(clients)), PACKET, { host: HOST });
  assert.deepEqual(report.notEvaluated, []);
  return report.branches.map((branch) => branch.outcome);
}

describe('nft rules that rewrite the packet', () => {
  test('a new client goes to any endpoint, and is remembered for the rule’s timeout', () => {
    const outcomes = trace([]);
    assert.deepEqual(
      outcomes.map((o) => (o.kind === 'dnat' ? [o.endpoint, o.seenDestination] : o.kind)),
      [
        ['10.1.0.1:8080', '10.1.0.1:8080'],
        ['10.1.0.2:8080', '10.1.0.2:8080'],
      ],
    );
    for (const o of outcomes)
      assert.match(o.kind === 'dnat' ? (o.affinity ?? '') : '', /remembers 10\.0\.0\.7 for 600s/);
  });

  test('a remembered client goes to its endpoint only, after the first rule rewrote and missed', () => {
    const outcomes = trace(['10.0.0.7 . 10.96.0.5 . tcp . 80 . 10.1.0.2']);
    assert.deepEqual(
      outcomes.map((o) => (o.kind === 'dnat' ? o.endpoint : o.kind)),
      ['10.1.0.2:8080'],
    );
  });

  test('another client of the same service is not pinned by that entry', () => {
    const outcomes = trace(['10.0.0.8 . 10.96.0.5 . tcp . 80 . 10.1.0.2']);
    assert.equal(outcomes.length, 2);
  });
});

describe('a rewrite by a map', () => {
  // The counts-map shape (dataplanes/nftables/endpoint-dispatch.ts): the key's endpoint count,
  // read into the header's port, picks the count chain; the element read is a step of the path.
  const counted = [
    'add table ip kproxy',
    'add map ip kproxy counts { type inet_service : inet_service ; }',
    'add chain ip kproxy nat-prerouting { type nat hook prerouting priority dstnat ; }',
    'add chain ip kproxy one',
    'add chain ip kproxy two',
    'add rule ip kproxy nat-prerouting ip daddr 10.96.0.5 tcp dport set tcp dport map @counts tcp dport vmap { 1 : goto one, 2 : goto two }',
    'add rule ip kproxy one dnat ip to 10.1.0.1:8080',
    'add rule ip kproxy two dnat ip to 10.1.0.2:8080',
    'add element ip kproxy counts { 80 : 2 }',
    '',
  ].join('\n');

  test('shows the element it read, and follows the rewritten packet', () => {
    const report = traceNftables(parseNftRuleset(counted), PACKET, { host: HOST });
    assert.deepEqual(report.notEvaluated, []);
    const [branch] = report.branches;
    assert.equal(report.branches.length, 1);
    assert.deepEqual(
      branch!.steps.filter((step) => step.kind === 'element').map((step) => step.text),
      ['@counts 80 : 2', 'anonymous map 2 : goto two'],
    );
    assert.equal(branch!.outcome.kind === 'dnat' && branch!.outcome.endpoint, '10.1.0.2:8080');
  });

  test('a key missing from the map stops the rule: no rewrite, no step', () => {
    const report = traceNftables(parseNftRuleset(counted.replace('80 : 2', '81 : 2')), PACKET, {
      host: HOST,
    });
    const [branch] = report.branches;
    assert.deepEqual(
      branch!.steps.filter((step) => step.kind === 'element'),
      [],
    );
    assert.notEqual(branch!.outcome.kind, 'dnat');
  });
});
