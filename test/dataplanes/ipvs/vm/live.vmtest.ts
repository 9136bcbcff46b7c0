// IPVS with real packets. Runs INSIDE the throwaway qemu VM (scripts/ipvs-in-qemu.sh; see
// test/in-vm.test.ts), whose kernel has ip_vs: the VM's own network namespace plays the node
// (the IPVS netlink socket lives in the namespace of this process), pods and an outside client are
// lab namespaces on veths to it:
//   client 10.100.0.200 ── kpcl | node 10.100.0.11 | kpv<m> ── pod m 10.244.1.(10+m)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { execa } from 'execa';
import type { DualStackState, Endpoint, ProxyState, ServicePort } from '../../../../contract/proxy-state.ts';
import { COMPANION_TABLE, companionSets } from '../../../../dataplanes/ipvs/companion-ruleset.ts';
import { NetlinkIpvsClient } from '../../../../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../../../../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../../../../dataplanes/ipvs/planner.ts';
import { execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import { netlinkConntrackDeleter } from '../../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { NetlinkElementWriter } from '../../../../dataplanes/shared/nft/netlink-elements.ts';
import type { EchoOutcome } from '../../../../harness/echo-client.ts';
import { Lab } from '../../../../harness/netns.ts';
import { endpoint, ipv4, localEndpoint, proxyState, servicePort } from '../../../../harness/proxy-states.ts';
import { tally } from '../../../../harness/topology.ts';
import { cleanupScript } from '../../../../src/cli/cleanup-script.ts';
import { Prober } from './prober.ts';

const HARNESS = join(import.meta.dirname, '../../../../harness');
const NODE_IP = '10.100.0.11';
const CLIENT_IP = '10.100.0.200';
const POD_IPS = ['10.244.1.10', '10.244.1.11', '10.244.1.12'];
const NODE_IP6 = 'fd00:100::11';
const CLIENT_IP6 = 'fd00:100::200';
const POD_IP6S = ['fd00:244:1::10', 'fd00:244:1::11', 'fd00:244:1::12'];

const lab = new Lab('ipvs');
const pods: string[] = [];
let client = '';
const probers = new Map<string, Prober>();

async function root(args: readonly string[]): Promise<void> {
  await execa('ip', args);
}

/** The VM's own namespace is throwaway: it may be configured freely. */
async function rootSysctl(key: string, value: string): Promise<void> {
  await execa('sysctl', ['-q', '-w', `${key}=${value}`]);
}

before(async () => {
  if (process.getuid?.() !== 0) throw new Error('the IPVS VM tests run as root inside the VM');
  await rootSysctl('net.ipv6.conf.all.accept_dad', '0');
  await rootSysctl('net.ipv6.conf.default.accept_dad', '0');
  await rootSysctl('net.ipv6.conf.all.forwarding', '1');
  client = await lab.addNetns('client');
  await lab.ip(client, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'kpcl', 'netns', '1']);
  await lab.ip(client, ['link', 'set', 'eth0', 'up']);
  await lab.ip(client, ['addr', 'add', `${CLIENT_IP}/24`, 'dev', 'eth0']);
  await lab.ip(client, ['route', 'add', 'default', 'via', NODE_IP]);
  await lab.addAddress(client, 'eth0', `${CLIENT_IP6}/64`);
  await lab.ip(client, ['-6', 'route', 'add', 'default', 'via', NODE_IP6]);
  await root(['link', 'set', 'kpcl', 'up']);
  await root(['addr', 'add', `${NODE_IP}/24`, 'dev', 'kpcl']);
  await root(['addr', 'add', `${NODE_IP6}/64`, 'dev', 'kpcl', 'nodad']);
  for (const [m, ip] of POD_IPS.entries()) {
    const ns = await lab.addNetns(`pod-${m}`);
    pods.push(ns);
    await lab.ip(ns, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', `kpv${m}`, 'netns', '1']);
    await lab.ip(ns, ['link', 'set', 'eth0', 'up']);
    await lab.ip(ns, ['addr', 'add', `${ip}/32`, 'dev', 'eth0']);
    await lab.ip(ns, ['route', 'add', '10.244.1.1', 'dev', 'eth0', 'scope', 'link']);
    await lab.ip(ns, ['route', 'add', 'default', 'via', '10.244.1.1', 'dev', 'eth0']);
    await lab.addAddress(ns, 'eth0', `${POD_IP6S[m]}/128`);
    await lab.ip(ns, ['-6', 'route', 'add', 'default', 'via', 'fe80::1', 'dev', 'eth0']);
    await root(['link', 'set', `kpv${m}`, 'up']);
    await root(['addr', 'add', '10.244.1.1/32', 'dev', `kpv${m}`]);
    await root(['route', 'add', `${ip}/32`, 'dev', `kpv${m}`]);
    await root(['addr', 'add', 'fe80::1/64', 'dev', `kpv${m}`, 'nodad']);
    await root(['-6', 'route', 'add', `${POD_IP6S[m]}/128`, 'dev', `kpv${m}`]);
  }
  // Node starts slowly under TCG: start the echo servers together.
  const servers = pods.map((ns, m) =>
    lab.spawn(ns, process.execPath, [
      join(HARNESS, 'echo-server.ts'),
      `pod-${m}`,
      '--tcp',
      '8080',
      '--udp',
      '8080',
    ]),
  );
  await Promise.all(servers.map((server) => server.waitFor('ready')));
  // After the servers, whose start has a deadline (a run with all six starting at once missed it
  // at host load ~11); the first probe waits for its prober's start.
  for (const ns of [client, pods[0]!, '']) probers.set(ns, new Prober(ns));
});

after(async () => {
  for (const prober of probers.values()) prober.close();
  await lab.destroy();
});

function ep(m: number): Endpoint {
  return localEndpoint(POD_IPS[m]!, 8080);
}

/** The service ports both states hold as they are. */
function unchanged(): ServicePort[] {
  return [
    servicePort('dns', {
      clusterIP: '10.96.0.53',
      protocol: 'UDP',
      port: 53,
      clusterEndpoints: [ep(0), ep(1)],
    }),
    servicePort('sticky', {
      clusterIP: '10.96.0.30',
      sessionAffinity: { timeoutSeconds: 600 },
      clusterEndpoints: [ep(0), ep(1)],
    }),
  ];
}

/** pod-2 is not ready: the model left it out, so no service reaches it. */
function stateA(): DualStackState {
  const ports: ServicePort[] = [
    servicePort('web', { clusterIP: '10.96.0.10', nodePort: 30080, clusterEndpoints: [ep(0), ep(1)] }),
    ...unchanged(),
    servicePort('empty', { clusterIP: '10.96.0.99', nodePort: 30099 }),
  ];
  return { ...ipv4(ports, { nodeIPs: [NODE_IP] }), IPv6: web6([ep6(0), ep6(1)]) };
}

/** web loses pod-1, empty goes away, api arrives. */
function stateB(): DualStackState {
  const ports: ServicePort[] = [
    servicePort('web', { clusterIP: '10.96.0.10', nodePort: 30080, clusterEndpoints: [ep(0)] }),
    ...unchanged(),
    servicePort('api', { clusterIP: '10.96.0.11', port: 443, clusterEndpoints: [ep(1)] }),
  ];
  return { ...ipv4(ports, { nodeIPs: [NODE_IP] }), IPv6: web6([ep6(0)]) };
}

function ep6(m: number): Endpoint {
  return localEndpoint(POD_IP6S[m]!, 8080);
}

function web6(endpoints: Endpoint[]): ProxyState {
  const web = servicePort('web', { clusterIP: 'fd00:96::10', clusterEndpoints: endpoints });
  return proxyState('IPv6', [web], { nodeIPs: [NODE_IP6] });
}

/** `ns` '' connects from the node itself (the VM's own namespace); the client or pod-0 otherwise. */
async function connect(
  ns: string,
  proto: 'tcp' | 'udp',
  host: string,
  port: number,
  count: number,
): Promise<EchoOutcome[]> {
  const prober = probers.get(ns);
  if (!prober) throw new Error(`no prober in ${ns || 'the node'}`);
  return prober.probe({ proto, host, port, count, timeoutMs: 2000 });
}

function names(outcomes: readonly EchoOutcome[]): Record<string, number> {
  return Object.fromEntries(tally(outcomes));
}

/** `ipvsadm -Ln` without counters, sorted, weight-0 (draining) real servers listed apart. */
async function ipvsTable(): Promise<{ serving: string[]; draining: string[] }> {
  const { stdout } = await execa('ipvsadm', ['-Sn']);
  const lines = stdout.split('\n').filter(Boolean).sort();
  return {
    serving: lines.filter((l) => !l.endsWith(' -w 0')),
    draining: lines.filter((l) => l.endsWith(' -w 0')),
  };
}

/** A listed companion table without the clients affinity remembered: packets fill that set. */
function withoutRememberedClients(listing: string): string {
  return listing.replace(/(\tset affinity-clients \{[^}]*?)\t\telements = \{[^}]*\}\n/g, '$1');
}

async function kernelState(): Promise<{ ipvs: string[]; addresses: string; nft: string }> {
  const addresses = (await execa('ip', ['-br', 'addr', 'show', 'dev', 'kproxy-ipvs0'])).stdout
    .split(/\s+/)
    .filter((a) => a.includes('/'))
    .sort()
    .join(' ');
  const nft = withoutRememberedClients(
    (await execa('nft', ['list', 'table', 'ip', 'kproxy-ipvs'])).stdout +
      (await execa('nft', ['list', 'table', 'ip6', 'kproxy-ipvs'])).stdout,
  );
  return { ipvs: (await ipvsTable()).serving, addresses, nft };
}

/** The VM's own namespace is the dataplane's: the conntrack entries cleanup cuts go by netlink from here. */
function dataplane(): IpvsDataplane {
  return new IpvsDataplane({
    runner: execaRunner(),
    openClient: () => NetlinkIpvsClient.open(),
    conntrack: netlinkConntrackDeleter,
  });
}

test('IPVS dataplane: real packets, incremental ≡ full, cleanup', async (t) => {
  // As the daemon runs it: the companion table's incremental elements by netlink.
  const elements = NetlinkElementWriter.open(COMPANION_TABLE, companionSets);
  t.after(() => elements.close());
  const dp = new IpvsDataplane({
    runner: execaRunner(),
    openClient: () => NetlinkIpvsClient.open(),
    conntrack: netlinkConntrackDeleter,
    timeouts: { tcpSeconds: 900, tcpFinSeconds: 0, udpSeconds: 300 },
    elements,
  });
  t.after(() => dp.cleanup());
  await dp.start();
  // Only the timeouts that were set change (tcpfin keeps the kernel's 120 s).
  assert.match(
    (await execa('ipvsadm', ['-L', '--timeout'])).stdout,
    /Timeout \(tcp tcpfin udp\): 900 120 300/,
  );
  const outcome = await dp.sync(stateA(), 'full');
  assert.equal(outcome.kind, 'full');
  // A cold start: the companion table's elements go as netlink batches before its hooks (hooks-last.ts).
  assert.ok(elements.batches >= 1, 'the cold start wrote its companion elements by netlink');

  await t.test('ClusterIP from outside reaches only the ready backends, masqueraded', async () => {
    const out = await connect(client, 'tcp', '10.96.0.10', 80, 12);
    assert.deepEqual(names(out), { 'pod-0': 6, 'pod-1': 6 });
    for (const o of out)
      if ('peer' in o) assert.ok(!o.peer.startsWith(`${CLIENT_IP}:`), `masqueraded: ${o.peer}`);
  });

  await t.test('NodePort reaches only the ready backends', async () => {
    assert.deepEqual(names(await connect(client, 'tcp', NODE_IP, 30080, 8)), { 'pod-0': 4, 'pod-1': 4 });
  });

  await t.test('IPv6 ClusterIP reaches only the ready backends', async () => {
    assert.deepEqual(names(await connect(client, 'tcp', 'fd00:96::10', 80, 6)), { 'pod-0': 3, 'pod-1': 3 });
  });

  await t.test('UDP ClusterIP reaches only the ready backends', async () => {
    const got = names(await connect(client, 'udp', '10.96.0.53', 53, 8));
    assert.deepEqual(Object.keys(got).sort(), ['pod-0', 'pod-1']);
  });

  await t.test('pod traffic keeps its source; a pod reaching itself is hairpin-masqueraded', async () => {
    const out = await connect(pods[0]!, 'tcp', '10.96.0.10', 80, 6);
    assert.deepEqual(names(out), { 'pod-0': 3, 'pod-1': 3 });
    for (const o of out) {
      if (!('peer' in o)) continue;
      if (o.name === 'pod-1') assert.ok(o.peer.startsWith(`${POD_IPS[0]}:`), `pod source kept: ${o.peer}`);
      else assert.ok(!o.peer.startsWith(`${POD_IPS[0]}:`), `hairpin masqueraded: ${o.peer}`);
    }
  });

  await t.test(
    'ClientIP affinity sticks to one backend (the companion table, IPVS not persistent)',
    async () => {
      assert.ok((await ipvsTable()).serving.includes('-A -t 10.96.0.30:80 -s rr'));
      const got = names(await connect(client, 'tcp', '10.96.0.30', 80, 8));
      assert.equal(Object.keys(got).length, 1, JSON.stringify(got));
      // The node's own connections are steered at nat-output, before IPVS at LOCAL_OUT.
      const fromNode = names(await connect('', 'tcp', '10.96.0.30', 80, 4));
      assert.equal(Object.keys(fromNode).length, 1, JSON.stringify(fromNode));
    },
  );

  await t.test('a service without endpoints is rejected, not left to time out', async () => {
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.99', 80, 2)), { 'error:ECONNREFUSED': 2 });
    assert.deepEqual(names(await connect(client, 'tcp', NODE_IP, 30099, 1)), { 'error:ECONNREFUSED': 1 });
  });

  await t.test('a port without a virtual server on a service address is rejected', async () => {
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.10', 22, 1)), { 'error:ECONNREFUSED': 1 });
  });

  // Tampering: what the sync loop does when intact() is false is a full sync (src/sync/sync-loop.ts).
  await t.test('a deleted virtual service is noticed by intact() and restored by the full sync', async () => {
    assert.equal(await dp.intact(), true);
    await execa('ipvsadm', ['-D', '-t', '10.96.0.10:80']);
    const broken = await connect(client, 'tcp', '10.96.0.10', 80, 2);
    assert.ok(
      broken.every((o) => 'error' in o),
      `no virtual service, no backend: ${JSON.stringify(broken)}`,
    );
    assert.equal(await dp.intact(), false);
    assert.equal((await dp.sync(stateA(), 'full')).kind, 'full');
    assert.equal(await dp.intact(), true);
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.10', 80, 4)), { 'pod-0': 2, 'pod-1': 2 });
  });

  await t.test('a flushed companion table is noticed by intact() and restored by the full sync', async () => {
    const masqueraded = (out: readonly EchoOutcome[]) =>
      out.map((o) => ('peer' in o ? !o.peer.startsWith(`${CLIENT_IP}:`) : 'error'));
    await execa('nft', ['flush', 'table', 'ip', 'kproxy-ipvs']);
    assert.ok(
      masqueraded(await connect(client, 'tcp', '10.96.0.10', 80, 2)).every((m) => m === false),
      'without its rules, outside traffic is no longer masqueraded',
    );
    assert.equal(await dp.intact(), false);
    assert.equal((await dp.sync(stateA(), 'full')).kind, 'full');
    assert.equal(await dp.intact(), true);
    assert.deepEqual(masqueraded(await connect(client, 'tcp', '10.96.0.10', 80, 4)), [
      true,
      true,
      true,
      true,
    ]);
  });

  await t.test('incremental sync: traffic follows, removed endpoint drains at weight 0', async () => {
    // The writer counts every batch since it opened, the cold start's too.
    const before = elements.batches;
    const result = await dp.sync(stateB(), 'incremental');
    assert.equal(result.kind, 'incremental');
    assert.equal(
      elements.batches - before,
      1,
      'the companion elements (empty gone, api new) in one netlink batch',
    );
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.10', 80, 4)), { 'pod-0': 4 });
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.11', 443, 2)), { 'pod-1': 2 });
    const gone = await connect(client, 'tcp', '10.96.0.99', 80, 1);
    assert.ok(
      gone.every((o) => 'error' in o),
      `removed service unreachable: ${JSON.stringify(gone)}`,
    );
    const { draining } = await ipvsTable();
    // pod-1 had connections to web's ClusterIP and node port (in TIME_WAIT in IPVS): it stays
    // at weight 0 until they end.
    assert.deepEqual(draining, [
      '-a -t 10.100.0.11:30080 -r 10.244.1.11:8080 -m -w 0',
      '-a -t 10.96.0.10:80 -r 10.244.1.11:8080 -m -w 0',
      '-a -t [fd00:96::10]:80 -r [fd00:244:1::11]:8080 -m -w 0',
    ]);
  });

  const incremental = await kernelState();
  // A fresh process, as `kproxy cleanup`: it knows the node port on the node's address from the
  // companion table's record only.
  await dataplane().cleanup();

  await t.test('cleanup removes virtual servers (node ports too), link and companion table', async () => {
    assert.equal((await execa('ipvsadm', ['-Sn'])).stdout.trim(), '');
    assert.notEqual((await execa('ip', ['link', 'show', 'kproxy-ipvs0'], { reject: false })).exitCode, 0);
    assert.doesNotMatch((await execa('nft', ['list', 'tables'])).stdout, /kproxy-ipvs/);
  });

  await t.test('a fresh full sync of B leaves exactly what full A + incremental B left', async () => {
    const fresh = dataplane();
    await fresh.start();
    await fresh.sync(stateB(), 'full');
    try {
      assert.deepEqual(await kernelState(), incremental);
    } finally {
      await fresh.cleanup();
    }
  });

  // What the package's purge runs once kproxy is gone (packaging/debian/prerm, postrm).
  await t.test(
    "the purge's script (kproxy cleanup --script) removes it all with the node's own tools",
    async () => {
      const fresh = dataplane();
      await fresh.start();
      await fresh.sync(stateB(), 'full');
      const script = cleanupScript(await dataplane().cleanupCommands());
      const purged = await execa('sh', [], { input: script, reject: false, all: true });
      assert.equal(purged.exitCode, 0, purged.all);
      assert.match(purged.all, /removed /);
      assert.equal((await execa('ipvsadm', ['-Sn'])).stdout.trim(), '');
      assert.notEqual((await execa('ip', ['link', 'show', 'kproxy-ipvs0'], { reject: false })).exitCode, 0);
      assert.doesNotMatch((await execa('nft', ['list', 'tables'])).stdout, /kproxy-ipvs/);
      const again = await execa('sh', [], { input: script, reject: false, all: true });
      assert.equal(again.exitCode, 0, again.all);
      assert.doesNotMatch(again.all, /removed /, 'a second run finds nothing to remove');
    },
  );

  await t.test(
    'render of B loaded with ip -batch, ipvsadm --restore and nft -f leaves what a full sync does',
    async () => {
      // What render prints is what the live dataplane sends (live-render.test.ts), in that order.
      const commands: Record<string, readonly string[]> = {
        'ip -batch': ['ip', '-batch', '-'],
        'ipvsadm --restore': ['ipvsadm', '--restore'],
        'nft -f': ['nft', '-f', '-'],
      };
      for (const section of ipvsPlanner.render(ipvsPlanner.planFull(stateB())).split(/^(?=# )/m)) {
        const newline = section.indexOf('\n');
        const input = section.slice(newline + 1);
        const [command, ...args] = commands[/; ([^;]+)\)$/.exec(section.slice(0, newline))?.[1] ?? '']!;
        if (input !== '') await execa(command!, args, { input });
      }
      try {
        assert.deepEqual(await kernelState(), incremental);
      } finally {
        await dataplane().cleanup();
      }
    },
  );

  await t.test('a restarted dataplane adopts and reconciles what an earlier run left', async () => {
    const first = dataplane();
    await first.start();
    await first.sync(stateA(), 'full');
    const second = dataplane();
    await second.start();
    await second.sync(stateB(), 'full');
    try {
      assert.deepEqual(await kernelState(), incremental);
    } finally {
      await second.cleanup();
    }
  });
});

// Where kproxy's IPVS mode does better than kube-proxy's, with real packets. Each runs on a clean
// node with its own dataplane.
async function withDataplane(
  options: Partial<ConstructorParameters<typeof IpvsDataplane>[0]>,
  body: (dp: IpvsDataplane) => Promise<void>,
): Promise<void> {
  const dp = new IpvsDataplane({
    runner: execaRunner(),
    openClient: () => NetlinkIpvsClient.open(),
    conntrack: netlinkConntrackDeleter,
    ...options,
  });
  await dp.start();
  try {
    await body(dp);
  } finally {
    await dp.cleanup();
  }
}

/** Every attempt failed without an answer (dropped), not refused (rejected) nor served. */
function dropped(outcomes: readonly EchoOutcome[]): boolean {
  return outcomes.every((o) => 'error' in o && o.error === 'timeout');
}

test('eTP=Local without a local endpoint: external traffic is dropped, cluster traffic still served', async () => {
  // pod-2's endpoint counts as on another node: the node has no local endpoint for this service.
  const state = ipv4(
    [
      servicePort('local-only', {
        clusterIP: '10.96.0.60',
        nodePort: 30060,
        loadBalancerIPs: ['10.200.0.60'],
        externalPolicyLocal: true,
        clusterEndpoints: [endpoint(POD_IPS[2]!, 8080)],
      }),
    ],
    { nodeIPs: [NODE_IP] },
  );
  await withDataplane({}, async (dp) => {
    await dp.sync(state, 'full');
    assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.60', 80, 2)), { 'pod-2': 2 });
    // kube-proxy's IPVS mode sends these to the remote endpoint (or blackholes them at a virtual
    // server without real servers); the policy says they must not leave the node: dropped.
    assert.ok(dropped(await connect(client, 'tcp', NODE_IP, 30060, 1)), 'node port dropped');
    assert.ok(dropped(await connect(client, 'tcp', '10.200.0.60', 80, 1)), 'LB IP dropped');
  });
});

test('mh with mh-fallback: a weight-0 (terminating) real server gets no new connection (kubernetes#138688)', async () => {
  const web = (eps: Endpoint[]) =>
    ipv4([servicePort('web', { clusterIP: '10.96.0.70', clusterEndpoints: eps })], { nodeIPs: [NODE_IP] });
  await withDataplane({ scheduler: 'mh' }, async (dp) => {
    await dp.sync(web([ep(0), ep(1)]), 'full');
    const reader = await NetlinkIpvsClient.open();
    try {
      const service = (await reader.listServices()).find((s) => s.address === '10.96.0.70');
      assert.deepEqual(service?.schedulerFlags, ['mh-fallback', 'mh-port'], 'flags as the kernel holds them');
      // mh-port spreads one client's connections by source port: both servers are used. The hash
      // (keyed at random per service) picks each about 1 in 2: 30 connections all on one server
      // is ~2e-9 (12 was 5e-4).
      assert.deepEqual(Object.keys(names(await connect(client, 'tcp', '10.96.0.70', 80, 30))).sort(), [
        'pod-0',
        'pod-1',
      ]);
      // pod-1 terminates: drained at weight 0, still in mh's lookup table (its last weight).
      assert.equal((await dp.sync(web([ep(0)]), 'incremental')).kind, 'incremental');
      const servers = await reader.listServers(service!);
      assert.deepEqual(servers.map((rs) => `${rs.address} w=${rs.weight}`).sort(), [
        '10.244.1.10 w=1',
        '10.244.1.11 w=0',
      ]);
      // Without mh-fallback the connections hashed to pod-1 would fail ("no destination available").
      assert.deepEqual(names(await connect(client, 'tcp', '10.96.0.70', 80, 12)), { 'pod-0': 12 });
    } finally {
      reader.close();
    }
  });
});

test('loadBalancerSourceRanges: per LB IP and port, the node included, nothing left once changed (kubernetes#119656)', async () => {
  const lb = (name: string, port: number, ranges: string[], clusterIP: string) =>
    servicePort(name, {
      clusterIP,
      port,
      loadBalancerIPs: ['10.200.0.80'],
      loadBalancerSourceRanges: ranges,
      clusterEndpoints: [ep(0)],
    });
  const state = (ranges: string[]) =>
    ipv4([lb('fw', 80, ranges, '10.96.0.80'), lb('open', 8081, [], '10.96.0.81')], { nodeIPs: [NODE_IP] });
  await withDataplane({}, async (dp) => {
    await dp.sync(state([`${CLIENT_IP}/32`]), 'full');
    assert.deepEqual(names(await connect(client, 'tcp', '10.200.0.80', 80, 2)), { 'pod-0': 2 });
    // The node is not in the ranges: kube-proxy's IPVS mode let it through (#119656).
    assert.ok(dropped(await connect('', 'tcp', '10.200.0.80', 80, 1)), 'the node is filtered too');
    await dp.sync(state(['192.0.2.0/24']), 'incremental');
    assert.ok(dropped(await connect(client, 'tcp', '10.200.0.80', 80, 1)), 'client no longer allowed');
    // Another Service on the same LB IP is not caught by these ranges, from outside or the node.
    assert.deepEqual(names(await connect(client, 'tcp', '10.200.0.80', 8081, 2)), { 'pod-0': 2 });
    assert.deepEqual(names(await connect('', 'tcp', '10.200.0.80', 8081, 1)), { 'pod-0': 1 });
    // Ranges that hold the node's IP let the node in (kube-proxy's TestLoadBalancer): its packets
    // come from the LB IP bound on the dummy link, which firewall-allow lists with the node.
    await dp.sync(state([`${NODE_IP}/32`]), 'incremental');
    assert.deepEqual(names(await connect('', 'tcp', '10.200.0.80', 80, 1)), { 'pod-0': 1 });
    // Ranges gone: nothing of them is left behind.
    await dp.sync(state([]), 'incremental');
    assert.deepEqual(names(await connect(client, 'tcp', '10.200.0.80', 80, 2)), { 'pod-0': 2 });
    assert.deepEqual(names(await connect('', 'tcp', '10.200.0.80', 80, 1)), { 'pod-0': 1 });
    assert.doesNotMatch(
      (await execa('nft', ['list', 'table', 'ip', 'kproxy-ipvs'])).stdout,
      /10\.200\.0\.80 \. tcp \. 80 \./,
    );
  });
});

test('ClientIP affinity honours the Service timeout, IPVS TIME_WAIT or not (kubernetes#89358)', async () => {
  const T = 5;
  const vip = '10.96.0.31';
  const brief = (eps: Endpoint[]) => {
    const affinity = { timeoutSeconds: T };
    const sp = servicePort('brief', { clusterIP: vip, sessionAffinity: affinity, clusterEndpoints: eps });
    return ipv4([sp], { nodeIPs: [NODE_IP] });
  };
  await withDataplane({}, async (dp) => {
    await dp.sync(brief([ep(0), ep(1)]), 'full');
    // Within T of each other, one client's connections go to one pod: IPVS scheduled the first
    // (rr), the companion table steered the others (rr's pointer did not move).
    const first = names(await connect(client, 'tcp', vip, 80, 4));
    assert.equal(Object.keys(first).length, 1, JSON.stringify(first));
    const stuck = Object.keys(first)[0]!;
    // Idle for more than T (the set's timeout; 2 s for jiffies and a slow VM). Upstream's
    // template would live on: IPVS still holds the first connection, closed, in TIME_WAIT (120 s).
    await new Promise((resolve) => setTimeout(resolve, (T + 2) * 1000));
    const connections = (await execa('ipvsadm', ['-Lnc'])).stdout;
    assert.match(connections, new RegExp(`TIME_WAIT +${CLIENT_IP}:\\d+ +${vip.replaceAll('.', '\\.')}:80 `));
    // So IPVS schedules the next connection, and rr moves on to the other pod.
    const next = names(await connect(client, 'tcp', vip, 80, 1));
    assert.equal(Object.keys(next).length, 1, JSON.stringify(next));
    assert.notEqual(Object.keys(next)[0], stuck, `${JSON.stringify(next)} after ${T}s idle`);
    // The pod the client now sticks to goes (it drains at weight 0): never steered to again.
    const kept = stuck === 'pod-0' ? 0 : 1;
    assert.equal((await dp.sync(brief([ep(kept)]), 'incremental')).kind, 'incremental');
    assert.deepEqual(names(await connect(client, 'tcp', vip, 80, 2)), { [`pod-${kept}`]: 2 });
  });
});
