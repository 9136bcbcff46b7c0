// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/planner.test.ts --name 'random sequences'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProxyState, ServicePort } from '../../../contract/proxy-state.ts';
import { serviceChainNames } from '../../../dataplanes/iptables/chain-names.ts';
import {
  iptablesPlanner,
  planFamilyFull,
  planFamilyIncremental,
} from '../../../dataplanes/iptables/planner.ts';
import { restoreInput } from '../../../dataplanes/iptables/restore-plan.ts';
import { probability } from '../../../dataplanes/iptables/service-port-rules.ts';
import { endpoint, localEndpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { FakeTables } from './fake-tables.ts';
import { randomChange, randomState } from './random-states.ts';
import { SCENARIOS } from './scenarios.ts';

function full(state: ProxyState): string {
  return restoreInput(planFamilyFull(state));
}

function incremental(prev: ProxyState, next: ProxyState): string {
  const plan = planFamilyIncremental(prev, next);
  return plan ? restoreInput(plan) : '';
}

function withPort(state: ProxyState, sp: ServicePort): ProxyState {
  return proxyState(state.family, [...[...state.servicePorts.values()].filter((p) => p.key !== sp.key), sp]);
}

const web = servicePort('web', {
  namespace: 'ns1',
  clusterIP: '10.96.0.10',
  clusterEndpoints: [localEndpoint('10.244.1.10', 8080), endpoint('10.244.2.10', 8080)],
});

test('service chain names hash like kube-proxy (sha256, base32, 16 characters)', () => {
  // kube-proxy's own fixtures name ns1/svc1:p80 over TCP KUBE-SVC-XPGD46QRK7WJZT7O.
  const names = serviceChainNames({ key: 'ns1/svc1:p80', protocol: 'TCP' } as ServicePort);
  assert.equal(names.cluster, 'KPROXY-SVC-XPGD46QRK7WJZT7O');
  assert.equal(names.external, 'KPROXY-EXT-XPGD46QRK7WJZT7O');
});

test('endpoint probabilities are 1/(n-i) printed with ten decimals', () => {
  assert.deepEqual([4, 3, 2].map(probability), ['0.2500000000', '0.3333333333', '0.5000000000']);
  const rules = full(proxyState('IPv4', [web])).split('\n');
  const choices = rules.filter((r) => r.startsWith('-A KPROXY-SVC-') && r.includes('-> '));
  assert.equal(choices.length, 2);
  assert.match(choices[0]!, /--probability 0\.5000000000 -j KPROXY-TEP-/);
  assert.doesNotMatch(choices[1]!, /statistic/, 'the last endpoint must be an unconditional match');
});

test('rendering is byte-identical for the same state', () => {
  for (const state of Object.values(SCENARIOS)) {
    assert.equal(
      iptablesPlanner.render(iptablesPlanner.planFull(state)),
      iptablesPlanner.render(iptablesPlanner.planFull(structuredClone(state))),
    );
  }
});

test('localhost node ports (kube-proxy iptables): 127.0.0.1 jumps to the node ports, behind the localnet firewall', () => {
  const np = servicePort('np', {
    namespace: 'ns1',
    clusterIP: '10.96.0.20',
    nodePort: 30080,
    clusterEndpoints: [web.clusterEndpoints.at(1)!],
  });
  const guard =
    /^-A KPROXY-FIREWALL .* -d 127\.0\.0\.0\/8 ! -s 127\.0\.0\.0\/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP$/m;
  const served = full(proxyState('IPv4', [np], { localhostNodePorts: true }));
  assert.match(served, /--dst-type LOCAL -j KPROXY-NODEPORTS$/m);
  assert.match(served, guard);
  const off = full(proxyState('IPv4', [np]));
  assert.match(off, /--dst-type LOCAL ! -d 127\.0\.0\.0\/8 -j KPROXY-NODEPORTS$/m);
  assert.doesNotMatch(off, /^-A KPROXY-FIREWALL/m, 'no guard without route_localnet');
  // The chain and its jumps stay either way (kube-proxy ensures KUBE-FIREWALL's always).
  assert.match(off, /^:KPROXY-FIREWALL /m);
  assert.match(off, /^-I INPUT 1 .* -j KPROXY-FIREWALL$/m);
  const listed = full(
    proxyState('IPv4', [np], { nodePortAddresses: ['127.0.0.0/8'], localhostNodePorts: true }),
  );
  assert.match(listed, /-d 127\.0\.0\.1 -j KPROXY-NODEPORTS$/m);
  const v6 = full(proxyState('IPv6', [np], { localhostNodePorts: true }));
  assert.match(v6, /--dst-type LOCAL ! -d ::1\/128 -j KPROXY-NODEPORTS$/m);
  assert.doesNotMatch(v6, /127\.0\.0/, 'ip6tables never gets the IPv4 guard');
  // Turning it on or off re-renders the shared chains that change, and nothing else.
  const toggled = incremental(
    proxyState('IPv4', [np]),
    proxyState('IPv4', [np], { localhostNodePorts: true }),
  );
  assert.deepEqual(
    toggled.split('\n').filter((line) => line.startsWith(':')),
    [':KPROXY-FIREWALL - [0:0]', ':KPROXY-SERVICES - [0:0]'],
  );
});

test('IPv6 uses bracketed DNAT targets and excludes ::1 from node ports', () => {
  const text = iptablesPlanner.render(iptablesPlanner.planFull(SCENARIOS['dual-stack']!));
  const [v4, v6] = text.split('# ip6tables-restore --noflush input');
  // After the nfacct objects that a full sync's rules count in.
  assert.match(v4!, /^# nfacct objects.*\n(nfacct add \w+\n)+# iptables-restore --noflush input/);
  assert.match(v6!, /--to-destination \[fd00:244:2::10\]:8080/);
  assert.match(v6!, /--dst-type LOCAL ! -d ::1\/128 -j KPROXY-NODEPORTS/);
  assert.doesNotMatch(v6!, /10\.96\./);
});

test('INVALID packets are dropped in the forward chain unless conntrack is liberal (kube-proxy, kubernetes#117924)', () => {
  const drop = /^-A KPROXY-FORWARD -m conntrack --ctstate INVALID -j DROP$/m;
  assert.match(full(proxyState('IPv4', [web])), drop);
  const liberal = full(proxyState('IPv4', [web], { conntrackTCPLiberal: true }));
  assert.doesNotMatch(liberal, /INVALID/);
  assert.match(
    liberal,
    /^-A KPROXY-FORWARD .*--ctstate RELATED,ESTABLISHED -j ACCEPT$/m,
    'the rest of the chain stays',
  );
  const toggled = incremental(
    proxyState('IPv4', [web]),
    proxyState('IPv4', [web], { conntrackTCPLiberal: true }),
  );
  assert.match(toggled, /^:KPROXY-FORWARD /m, 'turning it on rewrites the forward chain');
  assert.doesNotMatch(toggled, /INVALID/);
});

test("with kube-proxy's nfacct object, the dropped INVALID packets are counted in it (its metric's source)", () => {
  assert.match(
    full(proxyState('IPv4', [web], { invalidDropsCounted: true })),
    /^-A KPROXY-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP$/m,
  );
  const liberal = full(proxyState('IPv4', [web], { invalidDropsCounted: true, conntrackTCPLiberal: true }));
  assert.doesNotMatch(liberal, /INVALID|ct_state_invalid/, 'nothing dropped, nothing counted');
});

test('a service without endpoints is rejected in the filter table and gets no nat chains', () => {
  const text = full(SCENARIOS['no-endpoints']!.IPv4!);
  assert.match(
    text,
    /-A KPROXY-SERVICES .*"ns1\/empty:80\/TCP has no endpoints" .* -d 10\.96\.0\.70 --dport 80 -j REJECT/,
  );
  assert.match(text, /-A KPROXY-EXTERNAL-SERVICES .* -d 192\.0\.2\.70 --dport 80 -j REJECT/);
  assert.match(text, /-A KPROXY-EXTERNAL-SERVICES .*--dst-type LOCAL .*--dport 30070 -j REJECT/);
  assert.doesNotMatch(text, /KPROXY-(SVC|EXT|SEP)-/);
});

test('internal traffic policy Local without local endpoints drops ClusterIP traffic', () => {
  const text = full(SCENARIOS['internal-traffic-local']!.IPv4!);
  assert.match(
    text,
    /"ns1\/itp-none-here:80\/TCP has no local endpoints" .* -d 10\.96\.0\.41 --dport 80 -j DROP/,
  );
  assert.match(text, /"ns1\/itp:80\/TCP cluster IP" .* -d 10\.96\.0\.40 --dport 80 -j KPROXY-SVL-/);
});

test('session affinity checks recent lists in the service chain and sets them in the endpoint chain', () => {
  const text = full(SCENARIOS['session-affinity']!.IPv4!);
  const sep =
    /-A KPROXY-SVC-\S+ .* -m recent --name (KPROXY-TEP-\S+) --rcheck --seconds 10800 --reap -j \1/.exec(text);
  assert.ok(sep, 'affinity check rule');
  assert.match(text, new RegExp(`-A ${sep[1]} .* -m recent --name ${sep[1]} --set -m tcp -p tcp -j DNAT`));
});

test('LoadBalancer source ranges go through a firewall chain, with the LB IP allowed when the node is in range', () => {
  const text = full(SCENARIOS['load-balancer']!.IPv4!);
  const fw = /-d 192\.0\.2\.51 --dport 80 -j (KPROXY-FW-\S+)/.exec(text)?.[1];
  assert.ok(fw);
  const fwRules = text.split('\n').filter((r) => r.startsWith(`-A ${fw} `));
  assert.deepEqual(
    fwRules.map((r) => / -s (\S+)/.exec(r)?.[1] ?? 'end'),
    ['198.51.100.0/24', '10.100.0.0/16', '192.0.2.51', 'end'],
  );
  assert.match(
    text,
    new RegExp(`-A KPROXY-PROXY-FIREWALL .*not accepted by ${fw}.* -d 192\\.0\\.2\\.51 --dport 80 -j DROP`),
  );
});

test('an incremental plan with no change is empty', () => {
  const state = SCENARIOS['external-traffic-local']!.IPv4!;
  assert.equal(incremental(state, structuredClone(state)), '');
});

test('an endpoint change rewrites only that service chain and deletes the old endpoint chain', () => {
  const before = proxyState('IPv4', [web]);
  const after = withPort(before, {
    ...web,
    clusterEndpoints: [web.clusterEndpoints.at(0)!, endpoint('10.244.2.99', 8080)],
  });
  const text = incremental(before, after);
  const declared = text.split('\n').filter((l) => l.startsWith(':'));
  assert.equal(declared.length, 3, text);
  assert.ok(declared.some((l) => l.startsWith(':KPROXY-SVC-')));
  assert.doesNotMatch(text, /KPROXY-SERVICES/, 'unchanged top-level chains are not rewritten');
  assert.equal(text.split('\n').filter((l) => l.startsWith('-X KPROXY-TEP-')).length, 1);
});

test('a change of a wide Service rewrites its policy chain only when its endpoint set changed, and only the endpoint chains that came or went', () => {
  const endpoints = Array.from({ length: 2000 }, (_, i) => endpoint(`10.244.${i >> 8}.${i & 255}`, 8080));
  const wide = servicePort('wide', { clusterIP: '10.96.0.20', nodePort: 30020, clusterEndpoints: endpoints });
  const before = proxyState('IPv4', [wide]);
  const declared = (after: ServicePort) =>
    incremental(before, withPort(before, after))
      .split('\n')
      .filter((l) => l.startsWith(':') || l.startsWith('-X'))
      .map((l) => l.split(' ')[0]!.replace(/-[A-Z2-7]{16}$/, ''));
  // One endpoint replaced: the SVC chain, the new endpoint's chain; the old one deleted.
  const replaced = [...endpoints.slice(1), endpoint('10.244.99.1', 8080)];
  assert.deepEqual(declared({ ...wide, clusterEndpoints: replaced }).sort(), [
    '-X',
    ':KPROXY-SVC',
    ':KPROXY-TEP',
    ':KPROXY-TEP',
  ]);
  // Its node port moved: the node port chains, not the SVC chain nor an endpoint chain.
  assert.deepEqual(declared({ ...wide, nodePort: 30021 }).sort(), [':KPROXY-NODEPORTS']);
  // The same endpoints in another order: nothing (the choice is in chain-name order).
  assert.deepEqual(declared({ ...wide, clusterEndpoints: [...endpoints].reverse() }), []);
});

test('partial syncs on top of a full sync give the full sync of the last state (random sequences)', () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('partial ≡ full', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    for (let run = 0; run < 30; run++) {
      let state = randomState(random);
      const kernel = new FakeTables();
      kernel.restore(full(state));
      for (let step = 0; step < 8; step++) {
        const next = randomChange(random, state);
        kernel.restore(incremental(state, next));
        const fresh = new FakeTables();
        fresh.restore(full(next));
        assert.equal(kernel.dump(), fresh.dump(), `seed ${seed}, run ${run}, step ${step}`);
        state = next;
      }
    }
  }
});

test('changing node settings re-renders every service chain that depends on them', () => {
  const before = proxyState('IPv4', [web]);
  const after = proxyState('IPv4', [web], { masqueradeAll: true });
  const kernel = new FakeTables();
  kernel.restore(full(before));
  kernel.restore(incremental(before, after));
  const fresh = new FakeTables();
  fresh.restore(full(after));
  assert.equal(kernel.dump(), fresh.dump());
});

test('a family that disappears leaves no service chains behind', () => {
  const before = proxyState('IPv4', [web]);
  const kernel = new FakeTables();
  kernel.restore(full(before));
  kernel.restore(restoreInput(planFamilyIncremental(before, undefined)!));
  assert.deepEqual(
    kernel.chains('nat').filter((c) => /KPROXY-(SVC|SEP)-/.test(c)),
    [],
  );
});

test('over 1000 endpoints the per-endpoint rules lose their comments, and crossing back and forth stays exact', () => {
  const many = (n: number) =>
    proxyState(
      'IPv4',
      Array.from({ length: n }, (_, i) =>
        servicePort(`s${i}`, {
          namespace: 'ns',
          clusterIP: `10.96.${Math.floor(i / 250)}.${i % 250}`,
          clusterEndpoints: [endpoint(`10.244.${Math.floor(i / 250)}.${i % 250}`, 80)],
        }),
      ),
    );
  const small = many(1000);
  const large = many(1001);
  assert.match(full(small), /^-A KPROXY-TEP-\S+ -m comment --comment ns\/s0:80\/TCP -s /m);
  assert.doesNotMatch(full(large), /^-A KPROXY-TEP-\S+ -m comment/m);
  assert.doesNotMatch(full(large), / -> 10\.244\./);
  assert.match(full(large), /^-A KPROXY-SVC-\S+ -j KPROXY-TEP-/m);
  const kernel = new FakeTables();
  kernel.restore(full(small));
  kernel.restore(incremental(small, large));
  const fresh = new FakeTables();
  fresh.restore(full(large));
  assert.equal(kernel.dump(), fresh.dump());
});
