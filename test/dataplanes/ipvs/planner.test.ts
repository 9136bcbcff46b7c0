// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/planner.test.ts --name 'random states|deterministic'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import type { IpvsOp, IpvsPlan } from '../../../dataplanes/ipvs/ipvs-plan.ts';
import { ipvsadmLine } from '../../../dataplanes/ipvs/ipvs-render.ts';
import { createIpvsPlanner, ipvsDesired, ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import {
  elementKey,
  emptyNftRuleset,
  type NftRuleset,
} from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { endpoint, ipv4, localEndpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { prng } from '../../support/prng.ts';
import { testSeeds } from '../../support/seeds.ts';
import { applyScript, dump } from '../nftables/fake-nft.ts';
import { randomState } from '../nftables/random-state.ts';
import { applyOps, dumpServing, fromDesired } from './fake-ipvs.ts';

const remote = endpoint('10.244.2.10');
const local = localEndpoint('10.244.1.10');
const RR = { scheduler: 'rr' };

function full(state: DualStackState): Extract<IpvsPlan, { kind: 'full' }> {
  const plan = ipvsPlanner.planFull(state);
  assert.equal(plan.kind, 'full');
  return plan as Extract<IpvsPlan, { kind: 'full' }>;
}

function incremental(prev: DualStackState, next: DualStackState): Extract<IpvsPlan, { kind: 'incremental' }> {
  const plan = ipvsPlanner.planIncremental(prev, next);
  assert.equal(plan.kind, 'incremental');
  return plan as Extract<IpvsPlan, { kind: 'incremental' }>;
}

function servers(state: DualStackState, key: string): string[] {
  const vs = ipvsDesired(state, RR).virtualServers.get(key);
  assert.ok(vs, `virtual server ${key}`);
  return vs.realServers.map((rs) => `${rs.address}:${rs.port}/${rs.weight}`);
}

test('a ClusterIP becomes a round-robin virtual server with every endpoint at weight 1', () => {
  const state = ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [remote, local] })]);
  assert.deepEqual(servers(state, 'TCP 10.96.0.10:80'), ['10.244.2.10:8080/1', '10.244.1.10:8080/1']);
  const vs = ipvsDesired(state, RR).virtualServers.get('TCP 10.96.0.10:80')!;
  assert.equal(vs.scheduler, 'rr');
  assert.equal(vs.persistenceTimeout, 0);
  assert.deepEqual(full(state).desired.boundAddresses, ['10.96.0.10']);
});

test('the configured scheduler is used for every virtual server', () => {
  const state = ipv4([
    servicePort('web', { clusterIP: '10.96.0.10', nodePort: 30080, clusterEndpoints: [remote] }),
  ]);
  const desired = ipvsDesired(state, { scheduler: 'wlc' });
  assert.deepEqual(
    [...desired.virtualServers.values()].map((vs) => vs.scheduler),
    ['wlc', 'wlc'],
  );
  const text = createIpvsPlanner({ scheduler: 'sh' }).render(
    createIpvsPlanner({ scheduler: 'sh' }).planFull(state),
  );
  assert.match(text, /^-A -t 10\.96\.0\.10:80 -s sh$/m);
});

/** `set`'s elements in the companion table of `script`, as "key : value". */
function companionElements(script: string, set: string): string[] {
  const table = applyScript(emptyNftRuleset(), script).tables.get('ip kproxy-ipvs');
  const elements = table?.sets.get(set)?.elements ?? [];
  return elements
    .map((e) => `${elementKey(e)} : ${e.value?.join(e.value[0] === 'goto' ? ' ' : ' . ')}`)
    .sort();
}

test('ClientIP affinity is in the companion table, not IPVS persistence (kubernetes#89358)', () => {
  const state = ipv4(
    [
      servicePort('sticky', {
        clusterIP: '10.96.0.30',
        externalIPs: ['192.168.5.5'],
        nodePort: 30030,
        externalPolicyLocal: true,
        sessionAffinity: { timeoutSeconds: 600 },
        clusterEndpoints: [remote, local],
      }),
    ],
    { nodeIPs: ['10.100.0.11'] },
  );
  for (const vs of ipvsDesired(state, RR).virtualServers.values()) assert.equal(vs.persistenceTimeout, 0);
  assert.match(ipvsPlanner.render(full(state)), /^-A -t 192\.168\.5\.5:80 -s rr$/m);
  const script = full(state).nft.toString();
  // Each virtual server steers among exactly its own real servers (eTP Local: the local one).
  assert.deepEqual(companionElements(script, 'affinity-counts'), [
    '10.100.0.11 . tcp . 30030 : goto affinity-tcp-1',
    '10.96.0.30 . tcp . 80 : goto affinity-tcp-2',
    '192.168.5.5 . tcp . 80 : goto affinity-tcp-1',
  ]);
  assert.deepEqual(companionElements(script, 'affinity-endpoints'), [
    '10.100.0.11 . tcp . 30030 . 0 : 10.244.1.10 . 8080',
    '10.96.0.30 . tcp . 80 . 0 : 10.244.2.10 . 8080',
    '10.96.0.30 . tcp . 80 . 1 : 10.244.1.10 . 8080',
    '192.168.5.5 . tcp . 80 . 0 : 10.244.1.10 . 8080',
  ]);
  for (const [i, rs] of servers(state, 'TCP 10.96.0.30:80').entries())
    assert.ok(
      companionElements(script, 'affinity-endpoint-ips').includes(
        `10.96.0.30 . tcp . 80 . ${i} : ${rs.split(':')[0]}`,
      ),
    );
  assert.deepEqual(
    new Set(companionElements(script, 'affinity-timeouts').map((e) => e.split(' : ')[1])),
    new Set(['goto affinity-record-600']),
  );
  assert.match(script, /affinity-record-600 meta l4proto tcp update @affinity-clients \{ .* timeout 600s \}/);
  // Source ranges apply before a connection is steered past filter-input.
  assert.match(script, /add rule ip kproxy-ipvs affinity-tcp-2 jump firewall-check\n/);
});

test('node ports get a virtual server on each node-port address, which is not bound to the dummy link', () => {
  const state = ipv4(
    [servicePort('np', { clusterIP: '10.96.0.40', nodePort: 30040, clusterEndpoints: [remote] })],
    { nodeIPs: ['10.100.0.11', '192.168.1.11'], nodePortAddresses: ['192.168.1.0/24'] },
  );
  const keys = [...ipvsDesired(state, RR).virtualServers.keys()];
  assert.deepEqual(keys, ['TCP 10.96.0.40:80', 'TCP 192.168.1.11:30040']);
  assert.deepEqual(full(state).desired.boundAddresses, ['10.96.0.40']);
});

test('externalTrafficPolicy Local: external IPs, LB IPs and node ports only reach local endpoints', () => {
  const state = ipv4([
    servicePort('lb', {
      clusterIP: '10.96.0.20',
      nodePort: 30020,
      externalIPs: ['192.168.5.5'],
      loadBalancerIPs: ['192.168.6.6'],
      externalPolicyLocal: true,
      clusterEndpoints: [remote, local],
    }),
  ]);
  assert.deepEqual(servers(state, 'TCP 10.96.0.20:80'), ['10.244.2.10:8080/1', '10.244.1.10:8080/1']);
  for (const key of ['TCP 192.168.5.5:80', 'TCP 192.168.6.6:80', 'TCP 10.100.0.11:30020']) {
    assert.deepEqual(servers(state, key), ['10.244.1.10:8080/1'], key);
  }
  assert.deepEqual(full(state).desired.boundAddresses, ['10.96.0.20', '192.168.5.5', '192.168.6.6']);
  // No masquerade for policy Local: neither the external IPs nor the node port are in the sets.
  const script = full(state).nft.toString();
  assert.doesNotMatch(script, /add element ip kproxy-ipvs external-ips/);
  assert.doesNotMatch(script, /add element ip kproxy-ipvs nodeports/);
});

test('internalTrafficPolicy Local: the ClusterIP only reaches local endpoints', () => {
  const state = ipv4([
    servicePort('itp', {
      clusterIP: '10.96.0.21',
      internalPolicyLocal: true,
      clusterEndpoints: [remote, local],
    }),
  ]);
  assert.deepEqual(servers(state, 'TCP 10.96.0.21:80'), ['10.244.1.10:8080/1']);
});

test('no endpoint at all is rejected; no endpoint for the policy is dropped', () => {
  const state = ipv4([
    servicePort('empty', { clusterIP: '10.96.0.99', nodePort: 30099 }),
    servicePort('remote-only', {
      clusterIP: '10.96.0.98',
      nodePort: 30098,
      externalPolicyLocal: true,
      internalPolicyLocal: true,
      clusterEndpoints: [remote],
    }),
  ]);
  const script = full(state).nft.toString();
  assert.match(script, /10\.96\.0\.99 \. tcp \. 80 comment "default\/empty:80\/TCP" : goto reject-chain/);
  assert.match(script, /tcp \. 30099 comment "default\/empty:80\/TCP node port" : goto reject-chain/);
  assert.match(script, /10\.96\.0\.98 \. tcp \. 80 comment "default\/remote-only:80\/TCP" : drop/);
  assert.match(script, /tcp \. 30098 comment "default\/remote-only:80\/TCP node port" : drop/);
  // The virtual servers still exist (as upstream): the companion table turns their traffic away.
  assert.deepEqual(servers(state, 'TCP 10.96.0.99:80'), []);
});

test('a local endpoint reaching itself through a service is masqueraded (hairpin)', () => {
  const state = ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [remote, local] })]);
  assert.match(
    full(state).nft.toString(),
    /add element ip kproxy-ipvs hairpin \{ 10\.244\.1\.10 \. tcp \. 8080 \. 10\.244\.1\.10 \}/,
  );
});

test('an address claimed by two service ports goes to the first in key order', () => {
  const state = ipv4([
    servicePort('b', { clusterIP: '10.96.0.50', externalIPs: ['192.168.5.5'], clusterEndpoints: [remote] }),
    servicePort('a', { clusterIP: '10.96.0.51', externalIPs: ['192.168.5.5'], clusterEndpoints: [local] }),
  ]);
  assert.deepEqual(servers(state, 'TCP 192.168.5.5:80'), ['10.244.1.10:8080/1']);
});

test('IPv6 virtual servers and addresses use bracketed host:port and /128', () => {
  const state: DualStackState = {
    IPv6: proxyState('IPv6', [
      servicePort('web', { clusterIP: 'fd00:96::10', clusterEndpoints: [endpoint('fd00:244:2::10')] }),
    ]),
  };
  const text = ipvsPlanner.render(full(state));
  assert.match(text, /^-a -t \[fd00:96::10\]:80 -r \[fd00:244:2::10\]:8080 -m -w 1$/m);
  assert.match(text, /^address add fd00:96::10\/128 dev kproxy-ipvs0$/m);
  assert.match(text, /^add table ip6 kproxy-ipvs \{/m);
});

test('incremental: a removed TCP endpoint drains at weight 0, a removed UDP endpoint is deleted', () => {
  const tcp = (eps: (typeof remote)[]) =>
    servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: eps });
  const udp = (eps: (typeof remote)[]) =>
    servicePort('dns', { clusterIP: '10.96.0.53', protocol: 'UDP', port: 53, clusterEndpoints: eps });
  const plan = incremental(
    ipv4([tcp([remote, local]), udp([remote, local])]),
    ipv4([tcp([local]), udp([local])]),
  );
  assert.deepEqual(plan.ops.map(ipvsadmLine), [
    '-e -t 10.96.0.10:80 -r 10.244.2.10:8080 -m -w 0',
    '-d -u 10.96.0.53:53 -r 10.244.2.10:8080',
  ]);
  assert.deepEqual(plan.addresses, { add: [], delete: [] });
  assert.ok(plan.nft.empty, 'no companion change for an endpoint change of a served VIP');
});

test('incremental: new and removed services add and delete virtual servers and addresses only', () => {
  const web = servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: [remote] });
  const api = servicePort('api', { clusterIP: '10.96.0.11', clusterEndpoints: [local] });
  const old = servicePort('old', { clusterIP: '10.96.0.12', clusterEndpoints: [local] });
  const plan = incremental(ipv4([web, old]), ipv4([web, api]));
  assert.deepEqual(plan.ops.map(ipvsadmLine), [
    '-A -t 10.96.0.11:80 -s rr',
    '-a -t 10.96.0.11:80 -r 10.244.1.10:8080 -m -w 1',
    '-D -t 10.96.0.12:80',
  ]);
  assert.deepEqual(plan.addresses, { add: ['10.96.0.11'], delete: ['10.96.0.12'] });
  assert.doesNotMatch(plan.nft.toString(), /10\.96\.0\.10/, 'the unchanged service is not touched');
});

test('incremental: affinity changes only the companion; a draining real server is steered to no more', () => {
  const web = (eps: (typeof remote)[], affinity?: number) =>
    servicePort('web', {
      clusterIP: '10.96.0.10',
      clusterEndpoints: eps,
      ...(affinity && { sessionAffinity: { timeoutSeconds: affinity } }),
    });
  const on = incremental(ipv4([web([remote, local])]), ipv4([web([remote, local], 30)]));
  assert.deepEqual(on.ops, [], 'the virtual server is not made persistent');
  assert.match(on.nft.toString(), /affinity-counts \{ 10\.96\.0\.10 \. tcp \. 80 .*: goto affinity-tcp-2 \}/);
  const sticky = ipv4([web([remote, local], 30)]);
  const drained = incremental(sticky, ipv4([web([local], 30)]));
  assert.deepEqual(drained.ops.map(ipvsadmLine), ['-e -t 10.96.0.10:80 -r 10.244.2.10:8080 -m -w 0']);
  const after = applyScript(
    applyScript(emptyNftRuleset(), full(sticky).nft.toString()),
    drained.nft.toString(),
  );
  const endpoints = after.tables.get('ip kproxy-ipvs')?.sets.get('affinity-endpoints')?.elements ?? [];
  assert.deepEqual(
    endpoints.map((e) => e.value?.join(' . ')),
    ['10.244.1.10 . 8080'],
  );
});

test('planning is deterministic', () => {
  for (const seed of testSeeds({ first: 7 })) {
    const random = prng(seed);
    for (let i = 0; i < 20; i++) {
      const state = randomState(random);
      assert.equal(
        ipvsPlanner.render(ipvsPlanner.planFull(state)),
        ipvsPlanner.render(ipvsPlanner.planFull(state)),
      );
    }
  }
});

test('full(A) then incremental(A→B) serves exactly what full(B) serves (random states)', () => {
  for (const seed of testSeeds({ first: 42 })) {
    const random = prng(seed);
    let prev: DualStackState = {};
    let ipvs = fromDesired(full(prev).desired);
    let nft = applyScript(emptyNftRuleset(), full(prev).nft.toString());
    for (let i = 0; i < 200; i++) {
      const next = randomState(random);
      const plan = incremental(prev, next);
      applyOps(ipvs, plan.ops as IpvsOp[]);
      nft = applyScript(nft, plan.nft.toString());
      const expected = full(next);
      assert.deepEqual(
        dumpServing(ipvs),
        dumpServing(fromDesired(expected.desired)),
        `seed ${seed}, step ${i}`,
      );
      assert.deepEqual(
        dump(nft),
        dump(applyScript(emptyNftRuleset(), expected.nft.toString())),
        `seed ${seed}, step ${i}`,
      );
      if (i % 50 === 49) ipvs = fromDesired(expected.desired);
      prev = next;
    }
  }
});

test('incremental: a removed SCTP endpoint is deleted at once, as UDP (no graceful termination)', () => {
  const sctp = (eps: (typeof remote)[]) =>
    servicePort('sig', { clusterIP: '10.96.0.40', protocol: 'SCTP', port: 3868, clusterEndpoints: eps });
  const plan = incremental(ipv4([sctp([remote, local])]), ipv4([sctp([local])]));
  assert.deepEqual(plan.ops.map(ipvsadmLine), ['-d --sctp-service 10.96.0.40:3868 -r 10.244.2.10:8080']);
});

test('mh gets mh-fallback and mh-port, so a weight-0 real server is never picked (kubernetes#138688)', () => {
  const mh = createIpvsPlanner({ scheduler: 'mh' });
  const web = (eps: (typeof remote)[]) =>
    servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: eps });
  const plan = mh.planFull(ipv4([web([remote, local])]));
  assert.ok(plan.kind === 'full');
  assert.deepEqual(plan.desired.virtualServers.get('TCP 10.96.0.10:80')?.schedulerFlags, [
    'mh-fallback',
    'mh-port',
  ]);
  assert.match(mh.render(plan), /^-A -t 10\.96\.0\.10:80 -s mh -b mh-fallback,mh-port$/m);
  // The terminating endpoint is drained at weight 0; with mh-fallback mh skips it.
  const drained = mh.planIncremental(ipv4([web([remote, local])]), ipv4([web([local])]));
  assert.ok(drained.kind === 'incremental');
  assert.deepEqual(drained.ops.map(ipvsadmLine), ['-e -t 10.96.0.10:80 -r 10.244.2.10:8080 -m -w 0']);
  // Other schedulers have no flags.
  assert.deepEqual(
    ipvsDesired(ipv4([web([remote])]), RR).virtualServers.get('TCP 10.96.0.10:80')?.schedulerFlags,
    [],
  );
});

test('loadBalancerSourceRanges: filtered per LB IP and port, and nothing of them left once gone (kubernetes#119656)', () => {
  const lb = (port: number, ranges: string[]) =>
    servicePort(`lb-${port}`, {
      clusterIP: `10.96.0.${port % 100}`,
      port,
      loadBalancerIPs: ['192.168.6.10'],
      loadBalancerSourceRanges: ranges,
      clusterEndpoints: [remote],
    });
  // The source-range elements left in the table.
  const firewall = (state: NftRuleset): string[] =>
    [...(state.tables.get('ip kproxy-ipvs')?.sets.values() ?? [])]
      .filter((set) => set.name.startsWith('firewall-'))
      .flatMap((set) => set.elements.map(elementKey));
  const ranged = ipv4([lb(7001, ['203.0.113.0/24']), lb(8001, [])]);
  const start = applyScript(emptyNftRuleset(), full(ranged).nft.toString());
  assert.equal(firewall(start).length, 2);
  const script = full(ranged).nft.toString();
  // A second Service on the same LB IP is not filtered by the first one's ranges.
  assert.match(script, /add element ip kproxy-ipvs firewall-ips \{ 192\.168\.6\.10 \. tcp \. 7001 /);
  assert.doesNotMatch(script, /firewall-ips \{ 192\.168\.6\.10 \. tcp \. 8001/);
  assert.match(script, /firewall-allow \{ 192\.168\.6\.10 \. tcp \. 7001 \. 203\.0\.113\.0\/24 /);
  // The node's own traffic is filtered too (its source is the LB IP, not in these ranges).
  assert.match(script, /filter-output ct state new jump firewall-check/);
  for (const next of [ipv4([lb(7001, []), lb(8001, [])]), ipv4([lb(8001, [])]), ipv4([])]) {
    const after = applyScript(start, incremental(ranged, next).nft.toString());
    assert.deepEqual(dump(after), dump(applyScript(emptyNftRuleset(), full(next).nft.toString())));
    assert.deepEqual(firewall(after), [], 'no source-range element survives');
  }
});
