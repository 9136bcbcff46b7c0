// Kernel test (issue 29): a node as kube-proxy's IPVS mode leaves it, taken over by kproxy's
// nftables mode without a failed or black-holed connection. Runs INSIDE the qemu VM (its kernel
// has ip_vs; test/in-vm.test.ts), the node a lab namespace (IPVS is per namespace).
// kube-proxy's IPVS state is made by hand in its shapes: its iptables rules are
// fixtures/kube-proxy/ipvs-nodeport.restore (SOURCES.md there), its virtual services masq real
// servers with rr (upstream's TestNodePortIPv4 expectations), its ipsets, kube-ipvs0 with the
// ClusterIPs (down, as kube-proxy leaves it) and net.ipv4.vs.conntrack=1. The steps are the
// README's: kproxy's first full sync (in process, as test/dataplanes/shared/kube-proxy-takeover
// does), then `kproxy cleanup --kube-proxy --mode iptables` with its IPVS drain.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import { buildNftablesDataplane } from '../../../../dataplanes/nftables/build.ts';
import { type CommandRunner, execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import type { VirtualServiceTable } from '../../../../dataplanes/shared/kube-proxy-leftovers.ts';
import type { EchoReply } from '../../../../harness/echo-server.ts';
import { allowance } from '../../../../harness/emulation.ts';
import { conntrackDeleterIn } from '../../../../harness/namespace-conntrack.ts';
import { Lab, type LabProcess } from '../../../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../../../harness/proxy-states.ts';
import { probeUntilStopped } from '../../../../harness/steady-probes.ts';
import { ANSWER_TIMEOUT_MS, CLUSTER_CIDR_V4, Topology } from '../../../../harness/topology.ts';
import { cleanupCommand } from '../../../../src/cli/cleanup.ts';

const RULES = new URL('../../shared/fixtures/kube-proxy/ipvs-nodeport.restore', import.meta.url);
/** Upstream's TestNodePortIPv4 addresses: the TCP Service's ClusterIP and NodePort; a UDP ClusterIP beside. */
const TCP_CLUSTER_IP = '10.20.30.41';
const UDP_CLUSTER_IP = '10.20.30.42';
const NODE_PORT = 3001;
const [POD0, POD1] = ['10.244.1.10', '10.244.1.11'];

/**
 * One connection per target every PROBE_EVERY_MS. Not the 25 a second of the host's takeover test:
 * at that pace (75 connections a second for three targets) the VM's one emulated CPU saturated,
 * each tool the cleanup runs took 5-21 s instead of 3-5, and the cleanup stalled for minutes.
 */
const PROBE_EVERY_MS = 250;
const ANSWER_MS = allowance(ANSWER_TIMEOUT_MS);
/** The drain's bound in the first case: far above what it needs, so finishing early shows it drained. */
const LONG_BOUND_MS = allowance(6_000);

const fileStarted = performance.now();
/** Progress on the VM's console, which the harness shows when the file fails. */
function step(what: string): void {
  process.stderr.write(`[${((performance.now() - fileStarted) / 1000).toFixed(1)} s] ${what}\n`);
}

interface Target {
  readonly name: string;
  readonly proto: 'tcp' | 'udp';
  readonly host: string;
  readonly port: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** kube-proxy's IPVS mode on the node: sysctls, kube-ipvs0, virtual services, ipsets, iptables. */
async function startIpvsKubeProxy(lab: Lab, ns: string, nodeIP: string): Promise<void> {
  for (const [key, value] of [
    ['net.ipv4.vs.conntrack', '1'],
    ['net.ipv4.vs.expire_nodest_conn', '1'],
    ['net.ipv4.vs.expire_quiescent_template', '1'],
    ['net.ipv4.conf.all.route_localnet', '1'],
  ] as const)
    await lab.sysctl(ns, key, value);
  const services = [
    ['-t', `${TCP_CLUSTER_IP}:80`, 80],
    ['-t', `${nodeIP}:${NODE_PORT}`, 80],
    ['-u', `${UDP_CLUSTER_IP}:53`, 53],
  ] as const;
  const ipvsadm = services.flatMap(([proto, address, port]) => [
    `-A ${proto} ${address} -s rr`,
    ...[POD0, POD1].map((pod) => `-a ${proto} ${address} -r ${pod}:${port} -m -w 1`),
  ]);
  await lab.exec(ns, 'ipvsadm', ['-R'], { input: `${ipvsadm.join('\n')}\n` });
  await lab.exec(ns, 'ip', ['link', 'add', 'kube-ipvs0', 'type', 'dummy']);
  for (const ip of [TCP_CLUSTER_IP, UDP_CLUSTER_IP])
    await lab.exec(ns, 'ip', ['addr', 'add', `${ip}/32`, 'dev', 'kube-ipvs0']);
  const sets = [
    'create KUBE-CLUSTER-IP hash:ip,port family inet',
    `add KUBE-CLUSTER-IP ${TCP_CLUSTER_IP},tcp:80`,
    `add KUBE-CLUSTER-IP ${UDP_CLUSTER_IP},udp:53`,
    'create KUBE-IPVS-IPS hash:ip family inet',
    `add KUBE-IPVS-IPS ${TCP_CLUSTER_IP}`,
    `add KUBE-IPVS-IPS ${UDP_CLUSTER_IP}`,
    'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535',
    `add KUBE-NODE-PORT-TCP ${NODE_PORT}`,
    'create KUBE-LOOP-BACK hash:ip,port,ip family inet',
    'create KUBE-LOAD-BALANCER hash:ip,port family inet',
    'create KUBE-EXTERNAL-IP hash:ip,port family inet',
    'create KUBE-HEALTH-CHECK-NODE-PORT bitmap:port range 0-65535',
  ];
  await lab.exec(ns, 'ipset', ['restore'], { input: `${sets.join('\n')}\n` });
  await lab.exec(ns, 'iptables-nft-restore', ['--noflush', '--wait'], {
    input: await readFile(RULES, 'utf8'),
  });
}

/**
 * The cut connections' conntrack entries deleted by kproxy's netlink deleter in a child inside the
 * node's namespace (the test process's socket would reach the VM's own table). A node start under
 * TCG takes 5-15 s (harness/emulation.ts); the deletion itself milliseconds.
 */
const CONNTRACK_CHILD_MS = allowance(30_000);

/** The node's IPVS table through ipvsadm (the test process cannot enter the namespace for netlink). */
function ipvsadmTable(lab: Lab, ns: string): () => Promise<VirtualServiceTable<Service>> {
  return async () => ({
    async listServices() {
      const saved = (await lab.exec(ns, 'ipvsadm', ['-S', '-n'])).stdout;
      return [...saved.matchAll(/^-A -([tus]) (\S+):(\d+) /gm)].map(([, flag, address, port]) => ({
        flag: flag!,
        protocol: ({ t: 'TCP', u: 'UDP', s: 'SCTP' } as const)[flag as 't' | 'u' | 's'],
        address: address!,
        port: Number(port),
      }));
    },
    async deleteService(service) {
      await lab.exec(ns, 'ipvsadm', ['-D', `-${service.flag}`, `${service.address}:${service.port}`]);
    },
    close() {},
  });
}

interface Service {
  readonly flag: string;
  readonly protocol: string;
  readonly address: string;
  readonly port: number;
}

/** kproxy's model of the same Services. */
function kproxyState(nodeIP: string) {
  const endpoints = (port: number) => [endpoint(POD0, port), endpoint(POD1, port, { isLocal: true })];
  return ipv4(
    [
      servicePort('web', { clusterIP: TCP_CLUSTER_IP, nodePort: NODE_PORT, clusterEndpoints: endpoints(80) }),
      servicePort('dns', {
        protocol: 'UDP',
        port: 53,
        clusterIP: UDP_CLUSTER_IP,
        clusterEndpoints: endpoints(53),
      }),
    ],
    { localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] }, nodeIPs: [nodeIP] },
  );
}

/** `kproxy cleanup ARGS` in the node namespace, started now: its output so far, and its end. */
function startCleanup(runner: CommandRunner, lab: Lab, ns: string, args: string[]) {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: {
      write: (text: string) => {
        step(`cleanup: ${text.trimEnd()}`);
        stdout += text;
      },
    },
    stderr: { write: (text: string) => (stderr += text) },
    stdin: (async function* () {})(),
  };
  const started = performance.now();
  const conntrack = conntrackDeleterIn(
    execaRunner(['ip', 'netns', 'exec', ns], { timeoutMs: () => CONNTRACK_CHILD_MS }),
  );
  const done = cleanupCommand(args, io, runner, { openIpvs: ipvsadmTable(lab, ns), conntrack }).then(
    (code) => {
      assert.equal(code, 0, stderr);
      return { stdout, seconds: (performance.now() - started) / 1000 };
    },
  );
  return { output: () => stdout, done };
}

async function until(what: string, check: () => boolean | Promise<boolean>, withinMs: number): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!(await check())) {
    assert.ok(performance.now() < deadline, `not within ${withinMs} ms: ${what}`);
    await sleep(100);
  }
}

const lines = (proc: LabProcess) => proc.output().split('\n').filter(Boolean);

// One lab for both tests: under TCG its namespaces and echo servers take most of a minute.
const lab = new Lab('kpipvs');
let topology: Topology;
after(() => lab.destroy());
before(async () => {
  topology = await Topology.create(lab, { podsPerNode: [2] });
  for (const pod of topology.nodes[0]!.pods) await topology.startEcho(pod, { tcp: [80], udp: [53] });
  await lab.addRoute(topology.client.ns, ['10.20.30.0/24', 'via', topology.nodes[0]!.ipv4]);
  step('lab up');
});

/** The node as kube-proxy's IPVS mode leaves it (kproxy's table of a test before removed). */
async function ipvsNode() {
  const node = topology.nodes[0]!;
  await lab.exec(node.ns, 'nft', ['delete', 'table', 'ip', 'kproxy'], { reject: false });
  await lab.exec(node.ns, 'conntrack', ['-F'], { reject: false });
  await startIpvsKubeProxy(lab, node.ns, node.ipv4);
  const inNode = execaRunner(['ip', 'netns', 'exec', node.ns]);
  /** Each command on the console with its time: under TCG each takes seconds. */
  const runner: CommandRunner = {
    async run(command, args, input) {
      const started = performance.now();
      const result = await inNode.run(command, args, input);
      step(
        `  ${command} ${args.join(' ').slice(0, 80)}: ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
      return result;
    },
  };
  /** A TCP connection through IPVS: its greeting, and IPVS's entry for it. */
  const holdThroughIpvs = async () => {
    const proc = await topology.holdConnection(topology.client.ns, TCP_CLUSTER_IP, 80);
    const greeting = JSON.parse(lines(proc)[0]!) as EchoReply;
    const server = greeting.name === 'node-0-pod-0' ? POD0 : POD1;
    const listed = (await lab.exec(node.ns, 'ipvsadm', ['-L', '-n', '-c'])).stdout;
    assert.match(listed, new RegExp(`TCP .* ESTABLISHED .*${TCP_CLUSTER_IP}:80 +${server}:80`), listed);
    return { proc, greeting };
  };
  /** kproxy's first full sync, as `kproxy run` makes it. */
  const sync = async () => {
    const dataplane = buildNftablesDataplane({ runner, log: () => {} });
    await dataplane.start();
    assert.equal((await dataplane.sync(kproxyState(node.ipv4), 'full')).kind, 'full');
  };
  return { node, runner, holdThroughIpvs, sync };
}

test('kube-proxy IPVS → kproxy nftables: the drain keeps a held connection until it ends, no probe fails, UDP moves over', {
  timeout: allowance(16_000),
}, async (t) => {
  const { node, runner, holdThroughIpvs, sync } = await ipvsNode();
  const held = await holdThroughIpvs();
  const udp = await topology.holdConnection(topology.client.ns, UDP_CLUSTER_IP, 53, 'udp');
  step(`held through IPVS: TCP to ${held.greeting.name}, a UDP flow`);
  const targets: Target[] = [
    { name: 'TCP ClusterIP', proto: 'tcp', host: TCP_CLUSTER_IP, port: 80 },
    { name: 'NodePort', proto: 'tcp', host: node.ipv4, port: NODE_PORT },
    { name: 'UDP ClusterIP', proto: 'udp', host: UDP_CLUSTER_IP, port: 53 },
  ];
  const stop = probeUntilStopped(t, topology, targets, { everyMs: PROBE_EVERY_MS, answerMs: ANSWER_MS });
  await sync();
  step('kproxy synced');
  const cleanup = startCleanup(runner, lab, node.ns, [
    '--mode',
    'iptables',
    '--kube-proxy',
    '--ipvs-drain-timeout',
    `${LONG_BOUND_MS}ms`,
  ]);
  await until(
    'the cleanup waits for the held connection',
    () => /IPVS drain: waiting/.test(cleanup.output()),
    allowance(20_000),
  );
  assert.match(
    cleanup.output(),
    new RegExp(`TCP ${topology.client.ipv4}:\\d+ -> ${TCP_CLUSTER_IP}:80 .*ESTABLISHED`),
  );
  // kube-proxy's chains went first; its virtual services wait.
  const saved = (await lab.exec(node.ns, 'iptables-nft-save', [])).stdout;
  assert.doesNotMatch(saved, /KUBE-/, saved);
  assert.match((await lab.exec(node.ns, 'ipvsadm', ['-S', '-n'])).stdout, /-A -t/);
  // While it drains, the held connection still echoes, from the backend IPVS gave it.
  const echoed = lines(held.proc).length;
  await sleep(1000);
  assert.ok(lines(held.proc).length > echoed + 2, held.proc.output());
  assert.doesNotMatch(held.proc.output(), /error/);
  step('the held connection echoes during the drain; closing it');
  const closedAt = performance.now();
  await held.proc.stop(allowance(5_000));
  const { stdout, seconds } = await cleanup.done;
  const afterClose = (performance.now() - closedAt) / 1000;
  t.diagnostic(
    `cleanup: ${seconds.toFixed(1)} s in all, ${afterClose.toFixed(1)} s after the held connection closed; bound ${LONG_BOUND_MS / 1000} s`,
  );
  assert.ok(afterClose < LONG_BOUND_MS / 1000 / 4, `${afterClose} s`);
  assert.match(stdout, /IPVS drain: no live connection left/);
  assert.match(stdout, /removed IPVS: 3 virtual service\(s\)/);
  // The UDP flows IPVS balanced (the held one, the first probes'); the closed TCP one is not cut.
  assert.match(stdout, /removed conntrack: \d+ entr(y|ies) of \d+ cut IPVS connection/, stdout);
  const udpAtEnd = lines(udp).length;
  await sleep(1000);
  step('cleanup done; stopping the probes');
  const { probes, seconds: probed } = await stop();
  const failed = probes
    .filter(({ outcome }) => 'error' in outcome)
    .map(({ target, outcome }) => `${target.name}: ${JSON.stringify(outcome)}`);
  const slowest = Math.max(...probes.map(({ ms }) => ms));
  t.diagnostic(
    `${probes.length / targets.length} probes per target in ${probed.toFixed(1)} s (${(probes.length / targets.length / probed).toFixed(1)}/s), slowest answer ${slowest.toFixed(0)} ms`,
  );
  assert.deepEqual(failed, [], 'no probe fails across the takeover');
  // The UDP flow IPVS balanced answers after its conntrack entry went, now through kproxy's rules.
  assert.ok(lines(udp).length > udpAtEnd + 2, udp.output());
  assert.doesNotMatch(udp.output(), /error/);
  // Only kproxy's rules are left.
  assert.equal((await lab.exec(node.ns, 'ipvsadm', ['-S', '-n'])).stdout.trim(), '');
  assert.doesNotMatch((await lab.exec(node.ns, 'ip', ['-o', 'link'])).stdout, /kube-ipvs0/);
  assert.doesNotMatch((await lab.exec(node.ns, 'ipset', ['list', '-n'])).stdout, /KUBE-/);
  assert.doesNotMatch((await lab.exec(node.ns, 'iptables-nft-save', [])).stdout, /KUBE-/);
  assert.match((await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout, /table ip kproxy/);
  await udp.kill();
});

test('kube-proxy IPVS → kproxy nftables: a connection held past the bound is cut cleanly, the cleanup ends at the bound', {
  timeout: allowance(10_000),
}, async (t) => {
  const { node, runner, holdThroughIpvs, sync } = await ipvsNode();
  const held = await holdThroughIpvs();
  await sync();
  step('held through IPVS, kproxy synced');
  const boundS = 2;
  const cleanup = startCleanup(runner, lab, node.ns, [
    '--mode',
    'iptables',
    '--kube-proxy',
    '--ipvs-drain-timeout',
    `${boundS}s`,
  ]);
  const { stdout, seconds } = await cleanup.done;
  t.diagnostic(`cleanup: ${seconds.toFixed(1)} s with a bound of ${boundS} s`);
  assert.ok(seconds >= boundS, `${seconds} s`);
  assert.match(stdout, /IPVS drain: 1 connection\(s\) still live at the bound/);
  assert.match(stdout, /removed conntrack: \d+ entr(y|ies) of \d+ cut IPVS connection/, stdout);
  // Its next tick meets kproxy's DNAT; the endpoint has no such connection and resets it.
  await until(
    'the held connection is cut',
    () => /error/.test(held.proc.output()),
    allowance(ANSWER_TIMEOUT_MS),
  );
  assert.match(held.proc.output(), /"error":"(ECONNRESET|EPIPE|closed)"/, held.proc.output());
  assert.equal((await lab.exec(node.ns, 'ipvsadm', ['-S', '-n'])).stdout.trim(), '');
});
