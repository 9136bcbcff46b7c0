import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kproxyIpvsOwns } from '../../../dataplanes/ipvs/build.ts';
import {
  DRAIN_SWEEP_BIG_SERVICE_MS,
  DRAIN_SWEEP_EVERY_SYNC_MAX,
} from '../../../dataplanes/ipvs/draining-servers.ts';
import { compareVirtualServers, type DrainingCheck } from '../../../dataplanes/ipvs/drift.ts';
import { IpvsError } from '../../../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import { createIpvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import type { VirtualService } from '../../../dataplanes/ipvs/virtual-servers.ts';
import type { ConntrackDeleter, ExactEntry } from '../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { servicePortsOf } from '../../../dataplanes/shared/drift/drift-report.ts';
import { endpoint, ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { FakeConntrack } from '../shared/conntrack/fake-conntrack.ts';
import { FakeKernel } from './fake-kernel.ts';

const a = endpoint('10.244.2.10');
const b = localEndpoint('10.244.1.10');
const web = (eps = [a, b]) =>
  servicePort('web', { clusterIP: '10.96.0.10', nodePort: 30080, clusterEndpoints: eps });
const foreign: VirtualService = {
  family: 'IPv4',
  protocol: 'TCP',
  address: '192.168.50.1',
  port: 80,
  scheduler: 'wlc',
  schedulerFlags: [],
  persistenceTimeout: 0,
};

/** A conntrack deleter that records the entries it is asked to delete, and deletes them all. */
function recordingDeleter(deleted: ExactEntry[]): ConntrackDeleter {
  return {
    deleteEntries: async (entries) => {
      deleted.push(...entries);
      return entries.length;
    },
  };
}

function setup(): { kernel: FakeKernel; dp: IpvsDataplane } {
  const kernel = new FakeKernel();
  const dp = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
  return { kernel, dp };
}

test('a full sync creates the link, addresses, virtual servers and the companion table', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  const outcome = await dp.sync(ipv4([web()]), 'full');
  assert.equal(outcome.kind, 'full');
  assert.equal(kernel.link, true);
  assert.deepEqual([...kernel.addresses], ['10.96.0.10']);
  assert.deepEqual(kernel.ipvs(), [
    'TCP 10.100.0.11:30080 -> 10.244.1.10:8080 w=1',
    'TCP 10.100.0.11:30080 -> 10.244.2.10:8080 w=1',
    'TCP 10.100.0.11:30080 rr p=0',
    'TCP 10.96.0.10:80 -> 10.244.1.10:8080 w=1',
    'TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=1',
    'TCP 10.96.0.10:80 rr p=0',
  ]);
  assert.deepEqual(kernel.tables, ['ip']);
  assert.equal(outcome.objectCount, 1 + 3 + 3);
});

test('a restart adopts what the earlier run left and a full sync removes the stale part, not foreign servers', async () => {
  const first = setup();
  await first.dp.start();
  await first.dp.sync(
    ipv4([web(), servicePort('old', { clusterIP: '10.96.0.20', clusterEndpoints: [a] })]),
    'full',
  );
  await first.kernel.client().addService(foreign);
  const dp = new IpvsDataplane({
    runner: first.kernel.runner(),
    openClient: async () => first.kernel.client(),
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  assert.deepEqual([...first.kernel.services.keys()].sort(), [
    'TCP 10.100.0.11:30080',
    'TCP 10.96.0.10:80',
    'TCP 192.168.50.1:80',
  ]);
  assert.deepEqual([...first.kernel.addresses], ['10.96.0.10']);
});

test('a persistent virtual server an older run left (ClientIP as IPVS persistence) is made not persistent', async () => {
  const { kernel, dp } = setup();
  await kernel
    .client()
    .addService({ ...foreign, address: '10.96.0.10', scheduler: 'rr', persistenceTimeout: 600 });
  await dp.start();
  const sticky = { ...web(), sessionAffinity: { timeoutSeconds: 600 } };
  await dp.sync(ipv4([sticky]), 'full');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 rr p=0'), kernel.ipvs().join('\n'));
});

test('an incremental sync that fails falls back to a full sync', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.failNextNft = true;
  const next = ipv4([web(), servicePort('api', { clusterIP: '10.96.0.11', clusterEndpoints: [b] })]);
  const outcome = await dp.sync(next, 'incremental');
  assert.equal(outcome.kind, 'full');
  assert.ok(kernel.services.has('TCP 10.96.0.11:80'));
  assert.deepEqual([...kernel.addresses].sort(), ['10.96.0.10', '10.96.0.11']);
});

test('anything but a refusal in an incremental sync is a bug: it fails the sync instead of a fallback', async () => {
  const kernel = new FakeKernel();
  const runner = kernel.runner();
  const bug = new TypeError("Cannot read properties of undefined (reading 'key')");
  let failNextIp = false;
  const dp = new IpvsDataplane({
    runner: {
      run(command, args, input) {
        if (command === 'ip' && failNextIp) {
          failNextIp = false;
          throw bug;
        }
        return runner.run(command, args, input);
      },
    },
    openClient: async () => kernel.client(),
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  failNextIp = true;
  const next = ipv4([web(), servicePort('api', { clusterIP: '10.96.0.11', clusterEndpoints: [b] })]);
  await assert.rejects(dp.sync(next, 'incremental'), (error) => error === bug);
  assert.ok(!kernel.services.has('TCP 10.96.0.11:80'), 'no full sync in its place');
  // The sync loop's retry after a failure is full.
  assert.equal((await dp.sync(next, 'full')).kind, 'full');
  assert.ok(kernel.services.has('TCP 10.96.0.11:80'));
});

test('a removed TCP endpoint drains at weight 0, comes back cleanly, and goes once its connections end', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  assert.equal((await dp.sync(ipv4([web([b])]), 'incremental')).kind, 'incremental');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=0'));
  // Back while draining: weight 1 again (an add would fail with EEXIST and force a full sync).
  assert.equal((await dp.sync(ipv4([web()]), 'incremental')).kind, 'incremental');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=1'));
  // Gone again; the next sync after its connections end deletes it.
  await dp.sync(ipv4([web([b])]), 'incremental');
  assert.equal(dp.draining, 2);
  await dp.sync(ipv4([web([b])]), 'incremental');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=0'), 'still busy: kept');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 0, 0);
  await dp.sync(ipv4([web([b])]), 'incremental');
  assert.ok(!kernel.ipvs().some((l) => l.includes('10.96.0.10:80 -> 10.244.2.10')), 'drained: deleted');
});

test('one endpoint change of a wide Service costs its own commands, and its drain sweep dumps the Service once per interval', async () => {
  const kernel = new FakeKernel();
  const client = kernel.client();
  let dumps = 0;
  let commands = 0;
  let clock = 0;
  const counting = {
    ...client,
    listServers: (s: VirtualService) => {
      dumps++;
      return client.listServers(s);
    },
    send: (sent: Parameters<typeof client.send>[0]) => {
      commands += sent.length;
      return client.send(sent);
    },
  };
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => counting,
    now: () => clock,
  });
  const count = DRAIN_SWEEP_EVERY_SYNC_MAX + 1000;
  const pods = Array.from({ length: count }, (_, i) => endpoint(`10.244.${i >> 8}.${i & 255}`));
  const wide = (variant: number) =>
    ipv4([
      servicePort('wide', {
        clusterIP: '10.96.0.10',
        clusterEndpoints: pods.map((ep, i) =>
          i === 1000 && variant % 2 === 1 ? endpoint('10.245.0.1') : ep,
        ),
      }),
    ]);
  await dp.start();
  await dp.sync(wide(0), 'full');
  const change = async (variant: number) => {
    [dumps, commands] = [0, 0];
    assert.equal((await dp.sync(wide(variant), 'incremental')).kind, 'incremental');
    return { dumps, commands };
  };
  // Each change drains one pod and adds (or revives) the other: two commands, whatever the width.
  assert.deepEqual(await change(1), { dumps: 0, commands: 2 });
  // The first sweep of the Service dumps it (the drained pod has no connection: deleted)...
  assert.deepEqual(await change(2), { dumps: 1, commands: 2 });
  // ...and the next ones wait out its interval: no dump of its every real server per change.
  for (let variant = 3; variant < 8; variant++)
    assert.deepEqual(await change(variant), { dumps: 0, commands: 2 });
  assert.equal(dp.draining, 1);
  clock += DRAIN_SWEEP_BIG_SERVICE_MS;
  assert.deepEqual(await change(8), { dumps: 1, commands: 2 });
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.245.0.1:8080 w=0'), 'drained, in its interval');
  clock += DRAIN_SWEEP_BIG_SERVICE_MS;
  assert.deepEqual(await change(8), { dumps: 1, commands: 0 });
  assert.ok(!kernel.ipvs().some((l) => l.includes('-> 10.245.0.1:')), 'idle after its interval: deleted');
});

test('intact() notices a virtual server someone deleted, and the next sync is full', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  assert.equal(await dp.intact(), true);
  kernel.services.delete('TCP 10.96.0.10:80');
  assert.equal(await dp.intact(), false);
  assert.equal((await dp.sync(ipv4([web()]), 'incremental')).kind, 'full');
  assert.ok(kernel.services.has('TCP 10.96.0.10:80'));
});

for (const { what, tamper } of [
  {
    what: 'a real server deleted',
    tamper: (kernel: FakeKernel) =>
      kernel.services.get('TCP 10.96.0.10:80')!.servers.delete('10.244.2.10:8080'),
  },
  {
    what: 'a real server weighed 0',
    tamper: (kernel: FakeKernel) => {
      const servers = kernel.services.get('TCP 10.96.0.10:80')!.servers;
      servers.set('10.244.2.10:8080', { ...servers.get('10.244.2.10:8080')!, weight: 0 });
    },
  },
  {
    what: 'an address unbound from the dummy link',
    tamper: (kernel: FakeKernel) => kernel.addresses.clear(),
  },
  {
    what: 'a virtual server given another scheduler',
    tamper: (kernel: FakeKernel) => {
      const entry = kernel.services.get('TCP 10.96.0.10:80')!;
      entry.service = { ...entry.service, scheduler: 'wlc' };
    },
  },
]) {
  test(`intact() notices ${what}, and the next sync, full, puts it back`, async () => {
    const { kernel, dp } = setup();
    await dp.start();
    await dp.sync(ipv4([web()]), 'full');
    const synced = kernel.ipvs();
    assert.equal(await dp.intact(), true);
    tamper(kernel);
    assert.equal(await dp.intact(), false);
    assert.equal((await dp.sync(ipv4([web()]), 'incremental')).kind, 'full');
    assert.deepEqual(kernel.ipvs(), synced);
    assert.deepEqual([...kernel.addresses], ['10.96.0.10']);
    assert.equal(await dp.intact(), true);
  });
}

test('intact() notices a real server someone added, at any weight, and not one it drains itself', async () => {
  const { kernel, dp } = setup();
  const clusterIP: VirtualService = { ...foreign, address: '10.96.0.10', scheduler: 'rr' };
  const added = (weight: number) =>
    kernel.client().addServer(clusterIP, { address: '10.244.9.9', port: 8080, weight });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  await dp.sync(ipv4([web([b])]), 'incremental');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=0'));
  assert.equal(await dp.intact(), true, 'its own draining server is no damage');
  for (const weight of [1, 0]) {
    await added(weight);
    assert.equal(await dp.intact(), false, `a server added at weight ${weight}`);
    // The full sync drains it as it drains what it does not know (no connection: gone at the next).
    assert.equal((await dp.sync(ipv4([web([b])]), 'incremental')).kind, 'full');
    assert.equal(await dp.intact(), true);
    await dp.sync(ipv4([web([b])]), 'incremental');
    assert.ok(!kernel.ipvs().some((l) => l.includes('10.244.9.9')), kernel.ipvs().join('\n'));
  }
});

test('cleanup removes our virtual servers, the link and the companion tables, and nothing else', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  await kernel.client().addService(foreign);
  await dp.cleanup();
  assert.deepEqual([...kernel.services.keys()], ['TCP 192.168.50.1:80']);
  assert.equal(kernel.link, false);
  assert.deepEqual(kernel.tables, []);
});

test('cleanup cuts the connections still live at its drain bound, then deletes their conntrack entries by tuple', async () => {
  const kernel = new FakeKernel();
  const reported: string[] = [];
  const deleted: ExactEntry[] = [];
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => kernel.client(),
    drain: { timeoutMs: 0, report: (line) => reported.push(line) },
    conntrack: recordingDeleter(deleted),
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  // 10.100.0.200:41000 -> 10.96.0.10:80 by 10.244.1.10:8080, and one to a foreign service.
  kernel.connections = [
    'TCP 0A6400C8 A028 0A60000A 0050 0AF4010A 1F90 ESTABLISHED     899',
    'TCP 0A6400C8 A029 C0A83201 0050 0AF4010A 1F90 ESTABLISHED     899',
  ];
  await kernel.client().addService(foreign);
  const removed = await dp.cleanup();
  assert.match(reported.join('\n'), /1 connection\(s\) still live at the bound/);
  assert.deepEqual(deleted, [
    {
      protocol: 6,
      source: { address: '10.100.0.200', port: 41000 },
      destination: { address: '10.96.0.10', port: 80 },
      replySource: { address: '10.244.1.10', port: 8080 },
    },
  ]);
  assert.match(removed.join('\n'), /conntrack: 1 entry of 1 cut IPVS connection/);
  assert.deepEqual([...kernel.services.keys()], ['TCP 192.168.50.1:80']);
});

test('a virtual server gone during the drain (kube-proxy taking the node back) fails nothing and is not reported removed', async () => {
  const { kernel } = setup();
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => kernel.client(),
    // Meanwhile another owner deletes the node port's virtual server.
    drain: { timeoutMs: 0, report: () => kernel.services.delete('TCP 10.100.0.11:30080') },
    conntrack: { deleteEntries: async (entries) => entries.length },
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.connections = ['TCP 0A6400C8 A028 0A60000A 0050 0AF4010A 1F90 ESTABLISHED     899'];
  const removed = await dp.cleanup();
  assert.equal(removed[0], 'IPVS: 1 virtual service(s)');
  assert.deepEqual([...kernel.services.keys()], []);
  assert.equal(kernel.link, false);
});

test('cleanup leaves the virtual servers to kube-proxy while its kube-ipvs0 is on the node', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.kubeIpvsLink = true;
  await dp.cleanup();
  assert.deepEqual([...kernel.services.keys()].sort(), ['TCP 10.100.0.11:30080', 'TCP 10.96.0.10:80']);
  assert.equal(kernel.link, false);
  assert.deepEqual(kernel.tables, []);
});

test('kube-proxy’s IPVS mode started while the cleanup drains: its kube-ipvs0, checked again before the deletes, keeps the virtual servers and the connections it took over', async () => {
  const kernel = new FakeKernel();
  const logged: string[] = [];
  const reported: string[] = [];
  const deleted: ExactEntry[] = [];
  let clock = 0;
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => kernel.client(),
    log: (message, fields) => logged.push(`${message} ${JSON.stringify(fields)}`),
    drain: {
      timeoutMs: 5_000,
      report: (line) => reported.push(line),
      now: () => clock,
      // The operator hands the node back while the drain waits.
      sleep: async (ms) => {
        clock += ms;
        kernel.kubeIpvsLink = true;
      },
    },
    conntrack: recordingDeleter(deleted),
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.connections = ['TCP 0A6400C8 A028 0A60000A 0050 0AF4010A 1F90 ESTABLISHED     899'];
  const removed = await dp.cleanup();
  assert.match(reported.join('\n'), /waiting up to 5.0 s for 1 connection/);
  assert.deepEqual([...kernel.services.keys()].sort(), ['TCP 10.100.0.11:30080', 'TCP 10.96.0.10:80']);
  assert.deepEqual(
    logged.filter((line) => line.includes('kube-proxy')),
    ['IPVS virtual servers left to kube-proxy, whose kube-ipvs0 is on the node {"count":2}'],
  );
  // Its connections go on through the virtual servers it took over: none was cut.
  assert.deepEqual(deleted, []);
  assert.deepEqual(removed, ['link kproxy-ipvs0', 'nft table ip kproxy-ipvs']);
  assert.equal(kernel.link, false);
  assert.deepEqual(kernel.tables, []);
});

test('a fresh process (kproxy cleanup) removes the node ports on node addresses too, from the companion record', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  await kernel.client().addService(foreign);
  // A second node address gets the node port from an incremental sync (an element update).
  const twoAddresses = ipv4([web()], { nodeIPs: ['10.100.0.11', '10.100.0.12'] });
  assert.equal((await dp.sync(twoAddresses, 'incremental')).kind, 'incremental');
  assert.ok(kernel.services.has('TCP 10.100.0.12:30080'));
  const fresh = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
  await fresh.cleanup();
  assert.deepEqual([...kernel.services.keys()], ['TCP 192.168.50.1:80']);
  assert.deepEqual(kernel.tables, []);
});

test('kproxy run in another mode, on a node kube-proxy’s IPVS mode holds: the IPVS mode’s cleanup opens no IPVS and leaves kube-proxy’s virtual services, its node port on the node address too', async () => {
  // walk A's first move (kube-proxy IPVS → kproxy nftables): OtherModesCleanup runs this cleanup
  // in a fresh IPVS dataplane while `kproxy cleanup --kube-proxy` drains these same services.
  const kernel = new FakeKernel();
  kernel.kubeIpvsLink = true;
  const kubeProxy = kernel.client();
  for (const [address, port] of [
    ['10.96.0.10', 80],
    ['10.100.0.11', 30080],
  ] as const)
    await kubeProxy.addService({ ...foreign, address, port, scheduler: 'rr' });
  kernel.connections = ['TCP 0A6400C8 A028 0A64000B 7580 0AF4010A 1F90 ESTABLISHED     899'];
  let opened = 0;
  const fresh = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => {
      opened++;
      return kernel.client();
    },
  });
  assert.deepEqual(await fresh.cleanup(), []);
  assert.equal(opened, 0);
  assert.deepEqual([...kernel.services.keys()].sort(), ['TCP 10.100.0.11:30080', 'TCP 10.96.0.10:80']);
});

test('a restart adopts node-port virtual servers on a node address the node no longer has', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()], { nodeIPs: ['10.100.0.12'] }), 'full');
  const restarted = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
  await restarted.start();
  await restarted.sync(ipv4([web()], { nodeIPs: ['10.100.0.11'] }), 'full');
  assert.ok(kernel.services.has('TCP 10.100.0.11:30080'));
  assert.ok(!kernel.services.has('TCP 10.100.0.12:30080'), kernel.ipvs().join('\n'));
});

test('a fresh process lists cleanup as ipvsadm, ip and nft commands, ours only, and changes nothing', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  await kernel.client().addService(foreign);
  const before = [kernel.ipvs(), kernel.link, kernel.tables];
  const fresh = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
  const commands = await fresh.cleanupCommands();
  assert.deepEqual(
    commands.map((c) => [c.what, [c.command, ...c.args].join(' ')]),
    [
      ['IPVS: 2 virtual service(s)', 'ipvsadm -D -t 10.100.0.11:30080'],
      ['IPVS: 2 virtual service(s)', 'ipvsadm -D -t 10.96.0.10:80'],
      ['link kproxy-ipvs0', 'ip link del kproxy-ipvs0'],
      ['nft table ip kproxy-ipvs', 'nft -f -'],
    ],
  );
  assert.deepEqual(commands[0]!.when, [
    { command: 'test', args: ['-e', '/proc/net/ip_vs'] },
    { command: 'ipvsadm', args: ['-L', '-n', '-t', '10.100.0.11:30080'] },
  ]);
  assert.deepEqual([kernel.ipvs(), kernel.link, kernel.tables], before);
  // What cleanup() then reports: the same objects.
  assert.deepEqual(await fresh.cleanup(), [
    'IPVS: 2 virtual service(s)',
    'link kproxy-ipvs0',
    'nft table ip kproxy-ipvs',
  ]);
  assert.deepEqual([...kernel.services.keys()], ['TCP 192.168.50.1:80']);
});

test('cleanup on a kernel without ip_vs still removes the link and the companion tables', async () => {
  const kernel = new FakeKernel();
  kernel.link = true;
  await kernel.nft.run('add table ip kproxy-ipvs\n');
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => {
      throw new IpvsError('unavailable', 'IPVS is not available in this kernel');
    },
  });
  await dp.cleanup();
  assert.equal(kernel.link, false);
  assert.deepEqual(kernel.tables, []);
});

test('start applies the IPVS sysctls, strict ARP and the configured timeouts', async () => {
  const kernel = new FakeKernel();
  const timeouts = { tcpSeconds: 900, tcpFinSeconds: 0, udpSeconds: 300 };
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => kernel.client(),
    strictARP: true,
    timeouts,
  });
  await dp.start();
  assert.ok(kernel.sysctls.includes('net.ipv4.vs.conntrack=1'), 'masquerade needs conntrack for IPVS');
  assert.ok(kernel.sysctls.includes('net.ipv4.conf.all.arp_ignore=1'));
  assert.ok(kernel.sysctls.includes('net.ipv4.conf.all.arp_announce=2'));
  assert.deepEqual(kernel.timeouts, timeouts);
});

test('a full sync never removes virtual servers in excludeCIDRs, even on our addresses', async () => {
  const kernel = new FakeKernel();
  const dp = new IpvsDataplane({
    runner: kernel.runner(),
    openClient: async () => kernel.client(),
    excludeCIDRs: ['10.100.0.0/24'],
  });
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  await dp.sync(ipv4([{ ...web(), nodePort: 0 }]), 'full');
  assert.ok(kernel.services.has('TCP 10.100.0.11:30080'), 'excluded node-port server kept');
});

test('a removed SCTP or UDP real server loses its conntrack entries once (SCTP: IPVS, UDP: the reconciler); TCP drains', async () => {
  const kernel = new FakeKernel();
  const runner = kernel.runner();
  const conntrack = new FakeConntrack([
    { origDst: '10.96.0.40', dport: 3868, replySrc: '10.244.2.10', protocol: 'sctp' },
    { origDst: '10.96.0.53', dport: 53, replySrc: '10.244.2.10' },
    { origDst: '10.96.0.53', dport: 53, replySrc: '10.244.1.10' },
  ]);
  const dp = new IpvsDataplane({
    runner: {
      run: async (command, args, input) =>
        conntrack.answer(command, args) ?? runner.run(command, args, input),
    },
    openClient: async () => kernel.client(),
  });
  const sig = (eps = [a, b]) =>
    servicePort('sig', { clusterIP: '10.96.0.40', protocol: 'SCTP', port: 3868, clusterEndpoints: eps });
  const dns = (eps = [a, b]) =>
    servicePort('dns', { clusterIP: '10.96.0.53', protocol: 'UDP', port: 53, clusterEndpoints: eps });
  await dp.start();
  await dp.sync(ipv4([sig(), web(), dns()]), 'full');
  assert.deepEqual(conntrack.deletions(), [], 'the first sync keeps flows to serving endpoints');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  kernel.setConnections('SCTP 10.96.0.40:3868', '10.244.2.10:8080', 1, 0);
  const outcome = await dp.sync(ipv4([sig([b]), web([b]), dns([b])]), 'incremental');
  assert.ok(!kernel.ipvs().some((l) => l.includes('SCTP 10.96.0.40:3868 -> 10.244.2.10')), 'SCTP: gone');
  assert.ok(!kernel.ipvs().some((l) => l.includes('UDP 10.96.0.53:53 -> 10.244.2.10')), 'UDP: gone');
  assert.ok(kernel.ipvs().includes('UDP 10.96.0.53:53 -> 10.244.1.10:8080 w=1'), 'UDP: the other stays');
  assert.ok(kernel.ipvs().includes('TCP 10.96.0.10:80 -> 10.244.2.10:8080 w=0'), 'TCP: draining');
  assert.deepEqual(conntrack.deletions(), [
    'conntrack -D -p sctp --orig-dst 10.96.0.40 --dport 3868 --reply-src 10.244.2.10',
    'conntrack -D -f ipv4 -p udp --orig-dst 10.96.0.53 --dport 53 --reply-src 10.244.2.10',
  ]);
  assert.deepEqual(conntrack.flows, [{ origDst: '10.96.0.53', dport: 53, replySrc: '10.244.1.10' }]);
  assert.deepEqual(
    outcome.conntrack.map((r) => [r.family, r.deleted]),
    [['IPv4', 1]],
  );
});

test('drift: a weight-0 real server the plan lacks reads as draining only when the dataplane drains it', async () => {
  const { kernel, dp } = setup();
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  kernel.setConnections('TCP 10.96.0.10:80', '10.244.2.10:8080', 1, 0);
  await dp.sync(ipv4([web([b])]), 'incremental');
  const clusterIP: VirtualService = { ...foreign, address: '10.96.0.10', scheduler: 'rr' };
  await kernel.client().addServer(clusterIP, { address: '10.244.9.9', port: 8080, weight: 0 });
  const state = ipv4([web([b])]);
  const plan = createIpvsPlanner({ scheduler: 'rr' }).planFull(state);
  assert.equal(plan.kind, 'full');
  const held = kernel.traceRuleset().virtualServers;
  const extra = (drains?: DrainingCheck) =>
    compareVirtualServers(plan.desired, held, servicePortsOf(state), drains).map((p) => [p.kind, p.text]);
  // The daemon's dataplane knows what it drains: the one someone added is extra.
  assert.deepEqual(extra(dp.drains.bind(dp)), [['extra', '-a -t 10.96.0.10:80 -r 10.244.9.9:8080 -m -w 0']]);
  // Without that record (kproxy diff), both read as draining.
  assert.deepEqual(extra(), []);
});

test('kproxyIpvsOwns: the virtual services on its link’s and its recorded node-port addresses; nothing, its tables unread, without its link', async () => {
  const { kernel, dp } = setup();
  const ran: string[] = [];
  const runner = kernel.runner();
  const watched: typeof runner = {
    run: (command, args, input) => {
      ran.push(command);
      return runner.run(command, args, input);
    },
  };
  assert.equal((await kproxyIpvsOwns(watched))({ protocol: 'TCP', address: '10.96.0.10', port: 80 }), false);
  assert.deepEqual(ran, ['ip'], 'without the link, one run');
  await dp.start();
  await dp.sync(ipv4([web()]), 'full');
  const owns = await kproxyIpvsOwns(watched);
  assert.deepEqual(
    ['10.96.0.10', '10.100.0.11', '192.168.50.1'].map((address) =>
      owns({ protocol: 'TCP', address, port: 80 }),
    ),
    [true, true, false],
  );
});
