// The reconciler's pure half: reading `conntrack -L -o extended` and choosing the stale flows.
// The listings are real output (conntrack v1.4.7, captured in a lab namespace with a DNAT rule for
// 10.96.0.53:53 and fd00:96::53:53 to a pod, node port 30053 to another, and nothing for
// 10.96.0.99), so the parser is held to what the tool prints.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runAll } from '../../../../contract/base/work-slices.ts';
import type { ProxyState } from '../../../../contract/proxy-state.ts';
import {
  type ServingIndex,
  servingIndex,
  staleFlowFilters,
} from '../../../../dataplanes/shared/conntrack/stale-udp-flows.ts';
import { parseUdpFlows } from '../../../../dataplanes/shared/conntrack/udp-flow-listing.ts';
import { endpoint, proxyState, servicePort } from '../../../../harness/proxy-states.ts';

const IPV4_LISTING = `\
ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=52929 dport=53 src=10.244.1.10 dst=10.100.0.200 sport=5353 dport=52929 mark=0 use=1
ipv4     2 udp      17 27 src=10.100.0.200 dst=10.100.0.11 sport=44765 dport=30053 [UNREPLIED] src=10.244.2.10 dst=10.100.0.200 sport=5353 dport=44765 mark=0 use=1
ipv4     2 udp      17 29 src=10.100.0.200 dst=10.96.0.99 sport=48275 dport=53 [UNREPLIED] src=10.96.0.99 dst=10.100.0.200 sport=53 dport=48275 mark=0 use=1
ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=53645 dport=53 src=10.244.1.10 dst=10.100.0.200 sport=5353 dport=53645 mark=0 use=1
`;
const IPV6_LISTING = `\
ipv6     10 udp      17 28 src=fd00:100::200 dst=fd00:96::53 sport=54848 dport=53 src=fd00:244:1::10 dst=fd00:100::200 sport=5353 dport=54848 mark=0 use=1
`;

const parse = (text: string, family: 'IPv4' | 'IPv6' = 'IPv4') => runAll(parseUdpFlows(text, family));
const index = (next: ProxyState | undefined, prev?: ProxyState, only?: ReadonlySet<string>): ServingIndex =>
  runAll(servingIndex(next, prev, only));
/** The stale flows of IPV4_LISTING as "destination port → endpoint". */
const stale = (idx: ServingIndex, listing = IPV4_LISTING) =>
  runAll(staleFlowFilters('IPv4', parse(listing).flows, idx)).map(
    (f) => `${f.origDst}:${f.port} → ${f.replySrc}`,
  );

const dns = (ips: readonly string[], overrides = {}) =>
  servicePort('dns', {
    clusterIP: '10.96.0.53',
    protocol: 'UDP',
    port: 53,
    clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
    ...overrides,
  });
const nodePortService = (ips: readonly string[]) =>
  servicePort('np', {
    clusterIP: '10.96.0.60',
    protocol: 'UDP',
    port: 53,
    nodePort: 30053,
    clusterEndpoints: ips.map((ip) => endpoint(ip, 5353)),
  });
const v4 = (...ports: ReturnType<typeof servicePort>[]) => proxyState('IPv4', ports);

describe('parseUdpFlows', () => {
  test("reads each flow's original destination and port and its reply source (the DNAT target)", () => {
    const { flows, unparsed } = parse(IPV4_LISTING);
    assert.equal(unparsed, 0);
    assert.deepEqual(flows, [
      { origDst: '10.96.0.53', origDport: 53, replySrc: '10.244.1.10' },
      { origDst: '10.100.0.11', origDport: 30053, replySrc: '10.244.2.10' },
      { origDst: '10.96.0.99', origDport: 53, replySrc: '10.96.0.99' },
      { origDst: '10.96.0.53', origDport: 53, replySrc: '10.244.1.10' },
    ]);
    assert.deepEqual(parse(IPV6_LISTING, 'IPv6').flows, [
      { origDst: 'fd00:96::53', origDport: 53, replySrc: 'fd00:244:1::10' },
    ]);
  });

  test('skips and counts lines it cannot read, and reads the rest', () => {
    const listing = [
      'ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=1 dport=53 mark=0 use=1', // no reply tuple
      'ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.1 dst=10.96.0.53 sport=1 dport=53 src=10.244.1.10 dst=10.0.0.1 sport=53 dport=1',
      IPV6_LISTING.trim(), // another family
      'ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.300 sport=1 dport=53 src=10.244.1.10 dst=10.100.0.200 sport=5353 dport=1',
      'ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=1 dport=99999 src=10.244.1.10 dst=10.100.0.200 sport=5353 dport=1',
      'garbage',
      '',
      IPV4_LISTING.split('\n')[0],
    ].join('\n');
    const { flows, unparsed } = parse(listing);
    assert.equal(unparsed, 6);
    assert.deepEqual(flows, [{ origDst: '10.96.0.53', origDport: 53, replySrc: '10.244.1.10' }]);
  });

  test('canonicalises IPv6 addresses the way the model spells them', () => {
    const line =
      'ipv6     10 udp      17 28 src=fd00:100::200 dst=FD00:96:0:0::53 sport=1 dport=53 src=fd00:244:1:0:0:0:0:10 dst=fd00:100::200 sport=5353 dport=1';
    assert.deepEqual(parse(line, 'IPv6').flows, [
      { origDst: 'fd00:96::53', origDport: 53, replySrc: 'fd00:244:1::10' },
    ]);
  });
});

describe('staleFlowFilters', () => {
  test('a flow to a serving endpoint is kept: a restart deletes nothing healthy', () => {
    assert.deepEqual(stale(index(v4(dns(['10.244.1.10']), nodePortService(['10.244.2.10'])))), []);
  });

  test('an endpoint that went away loses its flows, once per (destination, port, endpoint)', () => {
    assert.deepEqual(stale(index(v4(dns(['10.244.1.11', '10.244.2.10'])))), ['10.96.0.53:53 → 10.244.1.10']);
  });

  test('two gone endpoints behind one address and port: one deletion each, not one for both', () => {
    // IPV4_LISTING's first flow from another client port, answered by another endpoint: the
    // deletions are keyed by reply source too, or `conntrack -D --reply-src` spares its flows.
    const otherEndpoint =
      'ipv4     2 udp      17 26 src=10.100.0.200 dst=10.96.0.53 sport=40001 dport=53 src=10.244.1.12 dst=10.100.0.200 sport=5353 dport=40001 mark=0 use=1\n';
    assert.deepEqual(stale(index(v4(dns(['10.244.2.10']))), IPV4_LISTING + otherEndpoint), [
      '10.96.0.53:53 → 10.244.1.10',
      '10.96.0.53:53 → 10.244.1.12',
    ]);
  });

  test('a port scaled to zero loses all its flows (kubernetes#139628)', () => {
    assert.deepEqual(stale(index(v4(dns([])))), ['10.96.0.53:53 → 10.244.1.10']);
  });

  test('a deleted service port, or an address or node port it dropped, loses its flows (kubernetes#141371)', () => {
    const before = v4(dns(['10.244.1.10']), nodePortService(['10.244.2.10']));
    assert.deepEqual(stale(index(v4(), before)), [
      '10.100.0.11:30053 → 10.244.2.10',
      '10.96.0.53:53 → 10.244.1.10',
    ]);
    const moved = dns(['10.244.1.10'], { clusterIP: '10.96.0.54' });
    assert.deepEqual(stale(index(v4(moved), v4(dns(['10.244.1.10'])))), ['10.96.0.53:53 → 10.244.1.10']);
  });

  test('a Service deleted while kproxy was down: its DNATed flows in the service CIDRs go when every flow is judged', () => {
    const cidrs = { serviceCIDRs: ['10.96.0.0/16'] };
    const idx = (only?: ReadonlySet<string>) =>
      index(proxyState('IPv4', [nodePortService(['10.244.2.10'])], cidrs), undefined, only);
    // 10.96.0.53 is no service address now: its DNATed flows are stale; the untranslated flow to
    // 10.96.0.99 and the node port flow are not judged by the CIDRs.
    assert.deepEqual(stale(idx()), ['10.96.0.53:53 → 10.244.1.10']);
    assert.deepEqual(stale(idx(new Set(['default/np:53/UDP']))), [], 'a reconcile of changed ports only');
    assert.deepEqual(stale(index(proxyState('IPv4', [], { serviceCIDRs: ['10.97.0.0/16'] }))), []);
  });

  test('an untranslated flow to a service address (it came before the rules) goes; other traffic stays', () => {
    // 10.96.0.99:53 was never DNATed: stale once a UDP service port holds it, unknown otherwise.
    const blackholed = servicePort('late', {
      clusterIP: '10.96.0.99',
      protocol: 'UDP',
      port: 53,
      clusterEndpoints: [endpoint('10.244.1.10', 5353)],
    });
    assert.deepEqual(stale(index(v4(dns(['10.244.1.10']), blackholed))), ['10.96.0.99:53 → 10.96.0.99']);
    // The same address on another port, or as a TCP port, is not this service port's.
    const otherPort = { ...blackholed, key: 'default/late:54/UDP', port: 54 };
    assert.deepEqual(stale(index(v4(dns(['10.244.1.10']), otherPort))), []);
    assert.deepEqual(
      stale(index(v4(dns(['10.244.1.10']), { ...blackholed, key: 'default/late:53/TCP', protocol: 'TCP' }))),
      [],
    );
  });

  test('node ports: DNATed flows to a gone endpoint go, untranslated ones only to a node IP', () => {
    assert.deepEqual(stale(index(v4(dns(['10.244.1.10']), nodePortService(['10.244.2.11'])))), [
      '10.100.0.11:30053 → 10.244.2.10',
    ]);
    const untranslated = (dst: string) =>
      `ipv4     2 udp      17 27 src=10.100.0.200 dst=${dst} sport=1 dport=30053 [UNREPLIED] src=${dst} dst=10.100.0.200 sport=30053 dport=1 mark=0 use=1\n`;
    const idx = index(v4(nodePortService(['10.244.2.10'])));
    assert.deepEqual(stale(idx, untranslated('10.100.0.11')), ['10.100.0.11:30053 → 10.100.0.11']);
    // A pod's own flow to some outside host at that port number is not node port traffic.
    assert.deepEqual(stale(idx, untranslated('192.0.2.7')), []);
  });

  test('serving endpoints no new flow uses (terminating, other topology) keep their flows', () => {
    const terminating = endpoint('10.244.1.10', 5353, { ready: false, serving: true, terminating: true });
    const port = { ...dns(['10.244.2.10']), otherServingEndpoints: [terminating] };
    assert.deepEqual(stale(index(v4(port))), []);
    // Local-only traffic: the remote endpoint is still a serving endpoint of the port.
    const local = dns([], {
      internalPolicyLocal: true,
      localEndpoints: [endpoint('10.244.2.10', 5353, { isLocal: true })],
    });
    assert.deepEqual(
      stale(index(v4({ ...local, otherServingEndpoints: [endpoint('10.244.1.10', 5353)] }))),
      [],
    );
    assert.deepEqual(stale(index(v4(local))), ['10.96.0.53:53 → 10.244.1.10']);
  });

  test('with the changed ports only, flows of unchanged ports are not judged', () => {
    const before = v4(dns(['10.244.1.10']), nodePortService(['10.244.2.10']));
    const after = v4(dns(['10.244.1.11']), nodePortService(['10.244.2.11']));
    assert.deepEqual(stale(index(after, before, new Set(['default/dns:53/UDP']))), [
      '10.96.0.53:53 → 10.244.1.10',
    ]);
    assert.deepEqual(stale(index(after, before, new Set(['default/np:53/UDP']))), [
      '10.100.0.11:30053 → 10.244.2.10',
    ]);
  });
});
