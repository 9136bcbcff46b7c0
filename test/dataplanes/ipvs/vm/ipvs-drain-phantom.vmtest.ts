// Kernel test (issue 29): the IPVS drain of `kproxy cleanup --kube-proxy` waits for the
// connections IPVS balances, not for IPVS connections that another connection's replies hold in a
// live state. Runs INSIDE the qemu VM (ip_vs; test/in-vm.test.ts), the node a lab namespace, the
// real CLI in it (kproxy's bundle: its netlink IPVS and conntrack sockets are the node's).
//
// IPVS finds the connection a reply belongs to by client address and port and real server alone,
// whatever the virtual service, and moves its state. Here a client's SYN through IPVS to the one
// pod goes unanswered (the pod drops it, as a full accept queue would) and the client gives up:
// IPVS lists SYN_RECV, conntrack SYN_SENT. Once kproxy's nftables rules took over, the client
// reuses the port for a connection kproxy DNATs to the same pod, after conntrack's entries of the
// handshakes went (as a table under pressure drops unassured entries first; deleted here): to the
// NodePort (conntrack then has no entry of the IPVS connection's tuple), and to the same
// ClusterIP (conntrack's entry of that tuple is the DNAT's). The pod's replies make both
// IPVS connections ESTABLISHED, where IPVS keeps them 15 minutes. The drain must end when the one
// connection IPVS balances (held open across the takeover) closes, long before its bound. Both
// reused ports' connections echo after the takeover and during the drain. After the cleanup the
// NodePort's still does, and the ClusterIP's is lost: the kernel's doing, which kproxy cannot
// prevent (below; README, "Migration from kube-proxy", says when it happens).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { buildNftablesDataplane } from '../../../../dataplanes/nftables/build.ts';
import { execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import { IPS_DST_NAT } from '../../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import type { EchoReply } from '../../../../harness/echo-server.ts';
import { allowance } from '../../../../harness/emulation.ts';
import { KPROXY_BIN } from '../../../../harness/kproxy-bin.ts';
import { conntrackReaderIn } from '../../../../harness/namespace-conntrack.ts';
import { Lab, type LabProcess } from '../../../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4, Topology } from '../../../../harness/topology.ts';

const CLUSTER_IP = '10.20.30.41';
const NODE_PORT = 3001;
/** The client ports reused: to the NodePort, and to the ClusterIP. */
const TO_NODE_PORT = 31001;
const TO_CLUSTER_IP = 31002;
/** The drain's bound: far above what it needs, so ending early shows it did not wait for the two. */
const BOUND_MS = allowance(8_000);

const started = performance.now();
/** Progress on the VM's console, which the harness shows when the file fails. */
function step(what: string): void {
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(1)} s] ${what}\n`);
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, withinMs: number): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!(await check())) {
    assert.ok(performance.now() < deadline, `not within ${withinMs} ms: ${what}`);
    await sleep(200);
  }
}

const lab = new Lab('kpphantom');
after(() => lab.destroy());

test('the IPVS drain ends with the connection IPVS balances, not with IPVS connections a reused port’s DNATed connection holds live', {
  timeout: allowance(20_000),
}, async () => {
  const topology = await Topology.create(lab, { podsPerNode: [1] });
  const node = topology.nodes[0]!;
  const pod = node.pods[0]!;
  const client = topology.client;
  await topology.startEcho(pod, { tcp: [80] });
  await lab.addRoute(client.ns, ['10.20.30.0/24', 'via', node.ipv4]);
  const sh = async (ns: string, script: string) => (await lab.exec(ns, 'sh', ['-ec', script])).stdout;
  // kube-proxy's IPVS mode as far as these connections need it: its sysctls first (IPVS's
  // conntrack entries on), the ClusterIP on kube-ipvs0, its virtual service masquerading to the one
  // pod, its nat chain (empty here), and a rule that reads conntrack (as kube-proxy's do): without
  // one the namespace tracks no connection until kproxy's rules load (seen in the VM).
  for (const [key, value] of [
    ['net.ipv4.vs.conntrack', '1'],
    ['net.ipv4.vs.expire_nodest_conn', '1'],
    ['net.ipv4.vs.expire_quiescent_template', '1'],
  ] as const)
    await lab.sysctl(node.ns, key, value);
  await sh(
    node.ns,
    `ipvsadm -A -t ${CLUSTER_IP}:80 -s rr
     ipvsadm -a -t ${CLUSTER_IP}:80 -r ${pod.ipv4}:80 -m -w 1
     ip link add kube-ipvs0 type dummy
     ip addr add ${CLUSTER_IP}/32 dev kube-ipvs0
     iptables-nft -t nat -N KUBE-SERVICES
     iptables-nft -t nat -A PREROUTING -j KUBE-SERVICES
     nft add table ip tracked
     nft add chain ip tracked pre '{ type filter hook prerouting priority 0; }'
     nft add rule ip tracked pre ct state new counter`,
  );
  const ipvsList = () => sh(node.ns, 'ipvsadm -L -n -c');
  const listed = (list: string, port: number) =>
    list.split('\n').find((line) => line.includes(`${client.ipv4}:${port} `)) ?? '';

  // The connection IPVS balances, held open across the takeover.
  const held = await topology.holdConnection(client.ns, CLUSTER_IP, 80);
  const heldPort = Number((JSON.parse(held.output().split('\n')[0]!) as EchoReply).peer.split(':')[1]);
  step(`held through IPVS from port ${heldPort}`);

  // The two unanswered handshakes: the pod drops every SYN (the held connection is established);
  // each client retries (a SYN at least every second keeps IPVS's SYN_RECV, 60 s, from expiring
  // meanwhile) until kproxy took over.
  await sh(
    pod.ns,
    `nft add table inet unanswered
     nft add chain inet unanswered in '{ type filter hook input priority 0; }'
     nft add rule inet unanswered in tcp dport 80 tcp flags syn drop`,
  );
  const tries = [TO_NODE_PORT, TO_CLUSTER_IP].map((port) =>
    lab.spawn(client.ns, 'sh', [
      '-c',
      `while :; do timeout 1 socat -u TCP:${CLUSTER_IP}:80,sourceport=${port},reuseaddr STDOUT; done`,
    ]),
  );
  await until(
    'IPVS lists both handshakes in SYN_RECV',
    async () => {
      const list = await ipvsList();
      return [TO_NODE_PORT, TO_CLUSTER_IP].every((port) => /SYN_RECV/.test(listed(list, port)));
    },
    allowance(5_000),
  );

  step(`handshakes in SYN_RECV; conntrack:\n${await sh(node.ns, 'conntrack -L -p tcp 2>&1')}`);
  // kproxy's first full sync: the ClusterIP and its NodePort DNATed to the pod.
  const inNode = execaRunner(['ip', 'netns', 'exec', node.ns]);
  const dataplane = buildNftablesDataplane({ runner: inNode, log: () => {} });
  await dataplane.start();
  const state = ipv4(
    [
      servicePort('web', {
        clusterIP: CLUSTER_IP,
        nodePort: NODE_PORT,
        clusterEndpoints: [endpoint(pod.ipv4, 80)],
      }),
    ],
    { localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] }, nodeIPs: [node.ipv4] },
  );
  assert.equal((await dataplane.sync(state, 'full')).kind, 'full');
  step('kproxy synced');
  // The clients give up: a socket closed in SYN_SENT sends nothing.
  for (const each of tries) await each.kill();
  await sleep(1_500);
  const list = await ipvsList();
  for (const port of [TO_NODE_PORT, TO_CLUSTER_IP]) assert.match(listed(list, port), /SYN_RECV/, list);
  step(`conntrack:\n${await sh(node.ns, 'conntrack -L -p tcp 2>&1')}\nIPVS:\n${list}`);
  // Whatever conntrack holds of the handshakes goes (as a table under pressure drops unassured
  // entries first): the reused ports' connections are new to it, and kproxy's rules take them.
  for (const port of [TO_NODE_PORT, TO_CLUSTER_IP])
    await sh(
      node.ns,
      `conntrack -D -p tcp -s ${client.ipv4} --sport ${port} -d ${CLUSTER_IP} --dport 80 || true`,
    );
  await sh(pod.ns, 'nft delete table inet unanswered');

  // The ports reused through kproxy's DNAT to the same pod, held open.
  const reuse = async (host: string, port: number, from: number): Promise<LabProcess> => {
    const proc = lab.spawn(
      client.ns,
      'socat',
      ['STDIO', `TCP:${host}:${port},sourceport=${from},reuseaddr`],
      { stdin: true },
    );
    await proc.waitFor('"name"');
    return proc;
  };
  const reused = [
    await reuse(node.ipv4, NODE_PORT, TO_NODE_PORT),
    await reuse(CLUSTER_IP, 80, TO_CLUSTER_IP),
  ];
  /**
   * Sends a line on each reused port's connection: for each, whether it came back within
   * `withinMs`, or how its wait ended (a reset connection's socat exits).
   */
  const echoes = async (what: string, withinMs: number): Promise<string[]> => {
    const outcomes: string[] = [];
    for (const [i, each] of reused.entries()) {
      const marker = `${what} ${i}`;
      each.send(`${marker}\n`);
      outcomes.push(
        await each.waitFor(marker, withinMs).then(
          () => 'echoed',
          (error: unknown) => `no echo: ${String(error).slice(0, 200)}`,
        ),
      );
    }
    step(`${what}: ${outcomes.join('; ')}`);
    return outcomes;
  };
  const bothEcho = async (what: string) =>
    assert.deepEqual(
      await echoes(what, allowance(5_000)),
      ['echoed', 'echoed'],
      await sh(node.ns, 'conntrack -L -p tcp 2>&1'),
    );
  await bothEcho('after the takeover');
  await until(
    'IPVS lists both reused ports ESTABLISHED',
    async () => {
      const now = await ipvsList();
      return [TO_NODE_PORT, TO_CLUSTER_IP].every((port) => /ESTABLISHED/.test(listed(now, port)));
    },
    allowance(3_000),
  );
  step(`IPVS lists the two reused ports live:\n${await ipvsList()}`);
  // What the drain's check rests on, in the kernel (IPS_DST_NAT, which `conntrack -L --dst-nat`
  // does not show: it compares the tuples, and IPVS's reply comes from the real server too): the
  // entry of the connection IPVS balances lacks it (IPVS rewrites only the reply tuple), the
  // DNATed ClusterIP connection's has it.
  const reader = conntrackReaderIn(
    execaRunner(['ip', 'netns', 'exec', node.ns], { timeoutMs: () => allowance(30_000) }),
  );
  const tuple = (port: number) => ({
    protocol: 6,
    source: { address: client.ipv4, port },
    destination: { address: CLUSTER_IP, port: 80 },
  });
  const [ipvsEntry, dnatEntry] = await reader.readEntries([tuple(heldPort), tuple(TO_CLUSTER_IP)]);
  assert.equal((ipvsEntry!.status & IPS_DST_NAT) === 0, true, JSON.stringify(ipvsEntry));
  assert.equal((dnatEntry!.status & IPS_DST_NAT) === 0, false, JSON.stringify(dnatEntry));

  const cleanup = lab.spawn(node.ns, process.execPath, [
    KPROXY_BIN,
    'cleanup',
    '--mode',
    'iptables',
    '--kube-proxy',
    '--ipvs-drain-timeout',
    `${BOUND_MS}ms`,
  ]);
  const waiting = await cleanup.waitFor('IPVS drain: waiting', allowance(10_000));
  await sleep(1_000);
  const waitingFor = cleanup.output().slice(cleanup.output().indexOf(waiting));
  step(`the drain: ${waitingFor}`);
  assert.match(waitingFor, /for 1 connection\(s\)/, waitingFor);
  assert.match(waitingFor, new RegExp(`${client.ipv4}:${heldPort} -> ${CLUSTER_IP}:80`), waitingFor);
  await bothEcho('during the drain');
  const closedAt = performance.now();
  await held.stop(allowance(5_000));
  await until(
    'the drain ends',
    () =>
      /IPVS drain: (no live connection left|\d+ connection\(s\) still live at the bound)/.test(
        cleanup.output(),
      ),
    BOUND_MS + allowance(5_000),
  );
  const drainedS = (performance.now() - closedAt) / 1000;
  step(
    `the drain ended ${drainedS.toFixed(1)} s after the held connection closed (bound ${BOUND_MS / 1000} s)`,
  );
  assert.doesNotMatch(cleanup.output(), /still live at the bound/, cleanup.output());
  // Its last line: the cut connections' entries (the two IPVS still lists), after the services.
  await cleanup.waitFor('removed conntrack', allowance(10_000));
  step(`cleanup:\n${cleanup.output()}`);
  assert.match(cleanup.output(), /removed IPVS: 1 virtual service\(s\)/, cleanup.output());

  // The virtual service gone, expire_nodest_conn=1 has IPVS expire every connection to its real
  // servers (ip_vs_expire_nodest_conn_flush, queued when a real server is deleted), the two the
  // reused ports hold included. An expiring IPVS connection (net.ipv4.vs.conntrack=1 when it was
  // made) kills the conntrack entry of its original tuple, client to virtual service, whoever made
  // it (ip_vs_conn_drop_conntrack): for the port reused to the same ClusterIP, kproxy's DNAT's entry.
  // Without the cleanup the same comes when IPVS's timer ends that connection (15 minutes after
  // the last reply in ESTABLISHED); with expire_nodest_conn=0, at the timer or at the next real
  // server's deletion in the namespace: no order of kproxy's steps avoids it.
  await until(
    'IPVS expired the two connections the reused ports held',
    async () => {
      const now = await ipvsList();
      return [TO_NODE_PORT, TO_CLUSTER_IP].every((port) => listed(now, port) === '');
    },
    allowance(10_000),
  );
  const [toNodePort, toClusterIP] = await reader.readEntries([
    {
      protocol: 6,
      source: { address: client.ipv4, port: TO_NODE_PORT },
      destination: { address: node.ipv4, port: NODE_PORT },
    },
    tuple(TO_CLUSTER_IP),
  ]);
  const table = await sh(node.ns, 'conntrack -L -p tcp 2>&1');
  step(`after the cleanup:\n${table}`);
  assert.ok(toNodePort !== undefined && (toNodePort.status & IPS_DST_NAT) !== 0, table);
  assert.equal(toClusterIP, undefined, table);
  // The NodePort's connection goes on. The ClusterIP's next packet is a new flow to conntrack
  // (picked up mid-stream), DNATed and masqueraded afresh: the pod has no socket for its new
  // source port and resets it (the client's socat exits).
  const after = await echoes('after the cleanup', allowance(5_000));
  assert.equal(after[0], 'echoed', after.join('; '));
  assert.match(after[1]!, /^no echo: .*exited before printing/, after.join('; '));
  for (const each of reused) {
    step(`a reused port's connection printed:\n${each.output()}`);
    await each.kill();
  }
  assert.equal((await sh(node.ns, 'ipvsadm -S -n')).trim(), '');
});
