import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { benchOptions } from '../../bench/bench-model.ts';
import { CommitReader, expectationKey, FinalRuleset } from '../../bench/churn-kernel.ts';
import { syntheticCluster } from '../../bench/synthetic-cluster.ts';
import { endpointChainName, serviceChainNames } from '../../dataplanes/iptables/chain-names.ts';
import { buildProxyState } from '../../src/model/build-state.ts';

const GEN = '# new generation 812 by process 4242 (node)';
/** Service 3's VIP (synthetic Services start at 10.96.0.10). */
const VIP = '10.96.0.13';
const element = (verb: 'add' | 'delete', map: string, index: number, endpoint: string) =>
  `${verb} element ip kproxy ${map} { ${VIP} . 80 . ${index} : ${endpoint} . 8080 }`;

/** The lines of each commit, as keys. */
function commits(reader: CommitReader, lines: readonly string[]): string[][] {
  return lines.flatMap((line) => {
    const keys = reader.line(line);
    return keys === undefined ? [] : [keys];
  });
}

describe('churn kernel: nftables', () => {
  it('keys an endpoint put in or taken out of a Service by the commit, netted over it', () => {
    const reader = new CommitReader('nftables');
    const removed = [
      // x at 2 leaves; the last slot's endpoint moves into its hole: it stays in.
      element('delete', 'backends-tcp', 2, '10.244.0.32'),
      element('delete', 'backends-tcp', 9, '10.244.0.39'),
      element('add', 'backends-tcp', 2, '10.244.0.39'),
      'add element ip kproxy backends-tcp-counts { 10.96.0.13 . 80 : 9 }',
      GEN,
    ];
    const added = [element('add', 'backends-tcp', 9, '10.244.128.30'), GEN];
    // Another map's elements (Local policy endpoints, hairpin pairs) are not the Service's endpoints.
    const others = [element('add', 'local-backends-tcp', 0, '10.244.0.50'), GEN];
    assert.deepEqual(commits(reader, [...removed, ...added, ...others]), [
      [`${VIP}>10.244.0.32-`],
      [`${VIP}>10.244.128.30+`],
      [],
    ]);
    assert.equal(
      expectationKey('nftables', { service: 3, endpoint: '10.244.0.32', present: false }),
      `${VIP}>10.244.0.32-`,
    );
  });

  it('holds the listed maps against the ready endpoints: every one in its slot 0..n-1, its count n', () => {
    const listing = (endpoints: readonly string[], count: number) => [
      'table ip kproxy {',
      '\tmap backends-tcp {',
      '\t\ttype ipv4_addr . inet_service . integer : ipv4_addr . inet_service',
      `\t\telements = { ${endpoints.map((e, i) => `${VIP} . 80 . ${i} : ${e} . 8080`).join(',\n\t\t\t     ')} }`,
      '\t}',
      '}',
      'table ip kproxy {',
      '\tmap backends-tcp-counts {',
      `\t\telements = { ${VIP} . 80 : ${count} }`,
      '\t}',
      '}',
    ];
    const expected = (i: number) => (i === 3 ? ['10.244.0.31', '10.244.0.30'] : []);
    const check = (lines: string[]) => {
      const ruleset = new FinalRuleset('nftables');
      for (const line of lines.join('\n').split('\n')) ruleset.line(line);
      return ruleset.mismatches(4, expected);
    };
    assert.deepEqual(check(listing(['10.244.0.30', '10.244.0.31'], 2)), []);
    assert.deepEqual(check(listing(['10.244.0.30', '10.244.0.31'], 3)), [3]);
    assert.deepEqual(check(listing(['10.244.0.30'], 1)), [3]);
    assert.deepEqual(check(listing(['10.244.0.30', '10.244.0.31', '10.244.0.32'], 2)), [3]);
  });
});

describe('churn kernel: iptables', () => {
  const { state } = buildProxyState(
    syntheticCluster({ services: 4, endpointsPerService: 2 }),
    benchOptions(),
  );
  const port = state.IPv4!.servicePorts.get('ns0/svc3:80/TCP')!;
  const [first, second] = [...port.clusterEndpoints].map((e) => endpointChainName(port, e));
  const svc = serviceChainNames(port).cluster;

  it("names the endpoint's chain as the iptables planner does", () => {
    const endpoint = port.clusterEndpoints.at(0)!;
    assert.equal(
      expectationKey('iptables', { service: 3, endpoint: endpoint.ip, present: true }),
      `${first}+`,
    );
  });

  it("keys a jump to an endpoint's chain as in, and the chain's deletion as out", () => {
    const reader = new CommitReader('iptables');
    const lines = [
      `delete rule ip nat ${svc} handle 12`,
      `add rule ip nat ${svc} xt match "statistic" counter packets 0 bytes 0 jump ${first}`,
      `add rule ip nat ${svc} counter packets 0 bytes 0 jump ${second}`,
      `add chain ip nat ${second}`,
      `add rule ip nat ${second} ip saddr 10.244.0.7 counter packets 0 bytes 0 jump KPROXY-MARK-MASQ`,
      GEN,
      `delete chain ip nat ${first}`,
      GEN,
    ];
    assert.deepEqual(commits(reader, lines), [[`${first}+`, `${second}+`], [`${first}-`]]);
  });

  it("holds iptables-save's jumps and DNATs against the ready endpoints", () => {
    const [a, b] = [...port.clusterEndpoints].map((e) => e.ip);
    const check = (jumps: readonly string[], dnat: string, expected: readonly string[]) => {
      const ruleset = new FinalRuleset('iptables');
      const lines = [
        '*nat',
        ...jumps.map((chain) => `-A ${svc} -m statistic --mode random --probability 0.5 -j ${chain}`),
        `-A ${first} -p tcp -m tcp -j DNAT --to-destination ${a}:8080`,
        `-A ${second} -p tcp -m tcp -j DNAT --to-destination ${dnat}:8080`,
        'COMMIT',
      ];
      for (const line of lines) ruleset.line(line);
      return ruleset.mismatches(4, (i) => (i === 3 ? expected : []));
    };
    assert.deepEqual(check([first!, second!], b!, [a!, b!]), []);
    assert.deepEqual(check([first!], b!, [a!, b!]), [3]);
    assert.deepEqual(check([first!, second!], '10.244.9.9', [a!, b!]), [3]);
    assert.deepEqual(check([first!, second!], b!, [a!]), [3]);
  });
});
