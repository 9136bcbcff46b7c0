// The tracer's IPVS prediction against real packets. Runs INSIDE the throwaway qemu VM
// (test/in-vm.test.ts), whose kernel has ip_vs: a random cluster synced by the live IPVS
// dataplane in the VM's own namespace (the node), pods and an outside client in lab namespaces
// on veths to it, and random flows from outside, from a pod and from the node itself to every
// kind of service address and to ports a ClusterIP does not serve. What the tracer says (of the
// rendered rules, and of what `trace --live` reads back) must be what happens: which pod answers,
// the source it sees, refused versus silently dropped (test/trace/flow-check.ts). The same check
// as test/trace/kernel-prediction.test.ts for nftables and iptables, with fewer flows: everything
// is ~10× slower under emulation.
//   client 10.101.0.200 ── kptc | node 10.101.0.11 | kpt<m> ── pod m 10.245.1.(10+m)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { execa } from 'execa';
import { NetlinkIpvsClient } from '../../../../dataplanes/ipvs/ipvs-client.ts';
import { IpvsDataplane } from '../../../../dataplanes/ipvs/live.ts';
import { ipvsPlanner } from '../../../../dataplanes/ipvs/planner.ts';
import { execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import { netlinkConntrackDeleter } from '../../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { allowance } from '../../../../harness/emulation.ts';
import { Lab } from '../../../../harness/netns.ts';
import { ANSWER_TIMEOUT_MS } from '../../../../harness/topology.ts';
import { readLiveRules, traceRuleText } from '../../../../src/cli/trace.ts';
import { prng } from '../../../support/prng.ts';
import { testSeeds } from '../../../support/seeds.ts';
import { checkFlow, comparable, inBatches } from '../../../trace/flow-check.ts';
import { Prober } from './prober.ts';
import {
  CLIENT_IP,
  FLOWS,
  GATEWAY,
  NODE_HOST,
  NODE_IP,
  POD_IPS,
  randomFlows,
  randomState,
  unmetOutcomes,
} from './random-flows.ts';

const HARNESS = join(import.meta.dirname, '../../../../harness');
// The VM is not given the host's environment: a seed of the clock each run. The seed's cluster
// and flows, and the outcomes they must meet, are swept on the host (random-flows.test.ts).
const SEED = testSeeds()[0]!;
const IN_FLIGHT = 16;
const ATTEMPTS = 2;
/**
 * How long a flow the tracer says is dropped (or routed nowhere) waits per attempt, not stretched
 * for emulation: a shorter wait can only miss a late answer, never fail a right prediction (see
 * test/trace/kernel-prediction.test.ts), and each stretched drop cost ~45 s of the VM run.
 */
const DROP_TIMEOUT_MS = 3_000;

const lab = new Lab('ipvs-trace');
const pods: string[] = [];
let client = '';
const probers = new Map<string, Prober>();

/** `ip -batch` in a lab namespace, or the node's own (''): one process start per namespace. */
async function ipBatch(ns: string, lines: readonly string[]): Promise<void> {
  const input = `${lines.join('\n')}\n`;
  if (ns === '') await execa('ip', ['-batch', '-'], { input });
  else await lab.exec(ns, 'ip', ['-batch', '-'], { input });
}

before(async () => {
  if (process.getuid?.() !== 0) throw new Error('the IPVS VM tests run as root inside the VM');
  // Every command is a process start, seconds each under TCG: one `ip -batch` per namespace.
  client = await lab.addNetns('client');
  for (const m of POD_IPS.keys()) pods.push(await lab.addNetns(`pod-${m}`));
  await ipBatch(client, [
    'link add eth0 type veth peer name kptc netns 1',
    'link set eth0 up',
    `addr add ${CLIENT_IP}/24 dev eth0`,
    `route add default via ${NODE_IP}`,
  ]);
  // lo is up in the VM (scripts/ipvs-in-qemu.sh), as on a node: the node's connections to its own
  // addresses (a ClusterIP on the dummy link is its own source then) and the ICMP errors that
  // refuse them need it, or a predicted REJECT would time out.
  const node = ['link set kptc up', `addr add ${NODE_IP}/24 dev kptc`];
  for (const [m, ip] of POD_IPS.entries()) {
    await ipBatch(pods[m]!, [
      `link add eth0 type veth peer name kpt${m} netns 1`,
      'link set eth0 up',
      `addr add ${ip}/32 dev eth0`,
      `route add ${GATEWAY} dev eth0 scope link`,
      `route add default via ${GATEWAY} dev eth0`,
    ]);
    node.push(`link set kpt${m} up`, `addr add ${GATEWAY}/32 dev kpt${m}`, `route add ${ip}/32 dev kpt${m}`);
  }
  await ipBatch('', node);
  // The VM's namespace is throwaway. A REJECT past a burst of 6 ICMP errors per second to one
  // peer would be silent (icmp_ratelimit): lift the limit, as the host's prediction test does.
  await execa('sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0', 'net.ipv4.icmp_msgs_per_sec=100000']);
  // Node starts slowly under TCG: the echo servers start together.
  const servers = pods.map((ns, m) =>
    lab.spawn(ns, process.execPath, [join(HARNESS, 'echo-server.ts'), `pod-${m}`, '--tcp', '8080']),
  );
  await Promise.all(servers.map((server) => server.waitFor('ready')));
  // After the servers, whose start has a deadline (live.vmtest.ts missed it with all six starting
  // at once); the first probes wait for their prober's start.
  for (const ns of [client, pods[0]!, '']) probers.set(ns, new Prober(ns));
});

after(async () => {
  await dp.cleanup();
  for (const prober of probers.values()) prober.close();
  await lab.destroy();
});

const random = prng(SEED);
const state = randomState(random);
const host = NODE_HOST;
const podOf = new Map(POD_IPS.map((ip, m) => [`${ip}:8080`, `pod-${m}`]));
let rendered = '';
let live = '';
// The VM's own namespace is the dataplane's: conntrack entries it cuts go by netlink from here.
const dp = new IpvsDataplane({
  runner: execaRunner(),
  openClient: () => NetlinkIpvsClient.open(),
  conntrack: netlinkConntrackDeleter,
});

before(async () => {
  await dp.start();
  assert.equal((await dp.sync(state, 'full')).kind, 'full');
  rendered = ipvsPlanner.render(ipvsPlanner.planFull(state));
  live = await readLiveRules('ipvs', execaRunner());
});

/** Random flows from outside, from a pod and from the node; the kinds of outcome they were predicted to meet, by origin. */
async function checkRandomFlows(count: number): Promise<Map<string, number>> {
  const flows = randomFlows(random, state, count).map((flow) => ({
    ...flow,
    ns: flow.from === 'client' ? client : flow.from === 'pod' ? pods[0]! : '',
  }));
  const kinds = new Map<string, number>();
  await inBatches(flows, IN_FLIGHT, async ({ n, ns, packet, service }) => {
    const outcomes = traceRuleText('ipvs', rendered, packet, host).branches.map((b) => b.outcome);
    const read = traceRuleText('ipvs', live, packet, host).branches.map((b) => b.outcome);
    assert.deepEqual(comparable(read), comparable(outcomes), `flow ${n}: trace --live agrees with render`);
    const kind = outcomes[0]?.kind ?? 'none';
    kinds.set(`${packet.via} ${kind}`, (kinds.get(`${packet.via} ${kind}`) ?? 0) + 1);
    const silent = kind === 'drop' || kind === 'no-service';
    const seen = await probers.get(ns)!.probe({
      proto: 'tcp',
      host: packet.destination,
      port: packet.port,
      count: ATTEMPTS,
      timeoutMs: silent ? DROP_TIMEOUT_MS : allowance(ANSWER_TIMEOUT_MS),
    });
    const what = `flow ${n}: ${packet.via} ${packet.source} -> ${packet.destination}:${packet.port} (${service}), predicted ${JSON.stringify(outcomes)}`;
    checkFlow(what, outcomes, seen, packet.source, podOf, host.localAddresses);
  });
  return kinds;
}

test(`${FLOWS} random flows (seed ${SEED}) from outside, a pod and the node end where the trace says`, async () => {
  const kinds = await checkRandomFlows(FLOWS);
  console.log(`outcomes by origin: ${JSON.stringify(Object.fromEntries(kinds))}`);
  assert.deepEqual(unmetOutcomes(kinds), [], `seed ${SEED}: ${JSON.stringify([...kinds])}`);
});
