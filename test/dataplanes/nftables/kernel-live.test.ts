// The live nftables dataplane on a real kernel: syncs through `nft` inside lab namespaces.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/kernel-live.test.ts --name 'random incremental sequences'
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DualStackState, ServicePort } from '../../../contract/proxy-state.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { Lab } from '../../../harness/netns.ts';
import { ANSWER_TIMEOUT_MS, type PodInfo, Topology, tally } from '../../../harness/topology.ts';
import { heldConnection } from '../../../lab/echo-output.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';
import { randomState } from './random-state.ts';

/** The JSON line a fixed-source-port UDP probe printed: the echo server's reply, or an error. */
type Probe = { readonly name?: string; readonly error?: string };

/**
 * One datagram from `sport` (a client that keeps its port, as DNS resolvers and statsd clients
 * do), on a connected socket so an ICMP reject shows as ECONNREFUSED; waits ANSWER_TIMEOUT_MS.
 */
async function udpFrom(lab: Lab, ns: string, host: string, port: number, sport: number): Promise<Probe> {
  const script = `
    const [host, port, sport, ms] = process.argv.slice(1);
    const socket = require('node:dgram').createSocket('udp4');
    const done = (line) => { console.log(line); process.exit(0); };
    setTimeout(() => done(JSON.stringify({ error: 'timeout' })), Number(ms));
    socket.on('message', (m) => done(m.toString().split('\\n')[0]));
    socket.on('error', (e) => done(JSON.stringify({ error: e.code })));
    socket.bind(Number(sport), () => socket.connect(Number(port), host, () => socket.send('ping\\n')));`;
  const args = ['-e', script, host, String(port), String(sport), String(ANSWER_TIMEOUT_MS)];
  const { stdout } = await lab.exec(ns, process.execPath, args);
  const { name, error } = JSON.parse(stdout.trim()) as Probe;
  return error === undefined ? { name } : { error };
}

const nameOf = (probe: Probe) => probe.name ?? probe.error;

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces, nft and conntrack (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nftables live kernel tests: ${ROOT_REASON}\n`);

/** Fallbacks logged by any dataplane of this file: each one is a planning bug. */
const fallbacks: string[] = [];

/** The dataplanes made so far: each keeps an `nft -i` session, which holds its namespace. */
const opened: NftablesDataplane[] = [];
const closeOpened = () => {
  for (const dataplane of opened.splice(0)) dataplane.close();
};

function dataplaneIn(lab: Lab, ns: string, coldStartChunk?: number): NftablesDataplane {
  const commands = lab.runner(ns);
  const log = (message: string, fields?: Readonly<Record<string, unknown>>) => {
    if (message.includes('falling back')) fallbacks.push(`${message} ${JSON.stringify(fields)}`);
  };
  const dataplane = new NftablesDataplane({ nft: commandNftRunner(commands), commands, log, coldStartChunk });
  opened.push(dataplane);
  return dataplane;
}

describe('nftables live dataplane on the kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let topo: Topology;
  let node0: string;

  const web = (pods: readonly PodInfo[]): ServicePort =>
    servicePort('web', {
      clusterIP: '10.96.0.10',
      clusterEndpoints: pods.map((p) => endpoint(p.ipv4, 8080, { isLocal: p.nodeName === 'node-0' })),
    });
  const dns = (pods: readonly PodInfo[]): ServicePort =>
    servicePort('dns', {
      clusterIP: '10.96.0.53',
      protocol: 'UDP',
      port: 53,
      clusterEndpoints: pods.map((p) => endpoint(p.ipv4, 5353, { isLocal: p.nodeName === 'node-0' })),
    });
  const state = (ports: ServicePort[]): DualStackState => ipv4(ports, { nodeIPs: [topo.nodes[0]!.ipv4] });

  before(async () => {
    lab = new Lab('nftlive');
    topo = await Topology.create(lab, { podsPerNode: [2, 2] });
    node0 = topo.nodes[0]!.ns;
    for (const p of topo.nodes.flatMap((n) => n.pods)) await topo.startEcho(p, { tcp: [8080], udp: [5353] });
    await lab.addRoute(topo.client.ns, ['10.96.0.0/16', 'via', topo.nodes[0]!.ipv4]);
  });
  after(() => {
    closeOpened();
    return lab?.destroy();
  });

  test('a long-lived TCP connection keeps its backend through endpoint changes, resyncs and a restart', async () => {
    const [a0, a1] = topo.nodes[0]!.pods;
    const [b0, b1] = topo.nodes[1]!.pods;
    const dp = dataplaneIn(lab, node0);
    await dp.sync(state([web([a0!, a1!, b0!])]), 'full');
    const holder = await topo.holdConnection(topo.client.ns, '10.96.0.10', 80);
    const held = heldConnection(holder.output, () => holder.kill());
    const backend = held.backend;
    const others = [a0!, a1!, b0!].filter((p) => p.name !== backend);
    const kept = [a0!, a1!, b0!].find((p) => p.name === backend)!;

    // Another endpoint leaves and a new one arrives (incremental), then a full resync.
    const changed = state([web([kept, others[0]!, b1!])]);
    assert.equal((await dp.sync(changed, 'incremental')).kind, 'incremental');
    assert.equal((await dp.sync(changed, 'full')).kind, 'full');
    // A restart: a new process adopts the table and reconciles without replacing it.
    const tableHandle = async () => (await lab.exec(node0, 'nft', ['-j', 'list', 'tables'])).stdout;
    const handleBefore = await tableHandle();
    const restarted = dataplaneIn(lab, node0);
    await restarted.start();
    await restarted.sync(state([web([kept, b1!])]), 'full');
    assert.equal(await tableHandle(), handleBefore, 'the adopted table was reconciled, not replaced');
    assert.ok(await held.alive(), `the connection still echoes: ${holder.output()}`);
    await held.close();

    const fresh = await topo.connect(topo.client.ns, 'tcp', '10.96.0.10', 80, { count: 30 });
    assert.deepEqual([...tally(fresh).keys()], [kept.name, b1!.name].sort());
  });

  // Stale UDP conntrack (dataplanes/shared/conntrack): a client that keeps its source port keeps
  // its translation, so each step is checked with real flows from fixed ports. The node's UDP
  // conntrack timeouts are raised so no entry expires on its own while a slow machine runs them.
  describe('stale UDP conntrack entries', () => {
    const probe = (sport: number) => udpFrom(lab, topo.client.ns, '10.96.0.53', 53, sport);
    /** Entries of flows to the DNS service address answered by `ip` (the DNAT target), or by anyone. */
    const flowsTo = async (ip?: string) => {
      const args = ['-L', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.53'];
      const listed = await lab.exec(node0, 'conntrack', ip ? [...args, '--reply-src', ip] : args, {
        reject: false,
      });
      return listed.stdout.split('\n').filter((l) => l.includes('udp')).length;
    };

    before(async () => {
      await lab.sysctl(node0, 'net.netfilter.nf_conntrack_udp_timeout', '600');
      await lab.sysctl(node0, 'net.netfilter.nf_conntrack_udp_timeout_stream', '600');
    });

    test('a restart keeps every healthy flow; a replaced endpoint loses only its own flows', async () => {
      const [a0, a1] = topo.nodes[0]!.pods;
      const [b0] = topo.nodes[1]!.pods;
      await dataplaneIn(lab, node0).sync(state([dns([a0!, b0!])]), 'full');
      // Each datagram of connect() comes from a new port, DNATed at random: 30 all to one endpoint
      // is a 1 in 2^29 chance (20 was 1 in 2^19).
      await topo.connect(topo.client.ns, 'udp', '10.96.0.53', 53, { count: 30 });
      // A held flow that went to a0: 30 ports all missing it is a 1 in 2^30 chance (10 ports, as
      // before, failed 1 run in 1024).
      let heldPort = 41000;
      let held: Probe;
      do held = await probe(++heldPort);
      while (nameOf(held) !== a0!.name && heldPort < 41030);
      assert.equal(nameOf(held), a0!.name, 'a held flow to a0');
      const [toA0, toB0] = [await flowsTo(a0!.ipv4), await flowsTo(b0!.ipv4)];
      assert.ok(toA0 > 0 && toB0 > 0, `flows to both endpoints: ${toA0}, ${toB0}`);

      const restarted = dataplaneIn(lab, node0);
      await restarted.start();
      const atStart = await restarted.sync(state([dns([a0!, b0!])]), 'full');
      assert.deepEqual(
        atStart.conntrack.map((r) => [r.family, r.deleted]),
        [['IPv4', 0]],
      );
      assert.deepEqual([await flowsTo(a0!.ipv4), await flowsTo(b0!.ipv4)], [toA0, toB0], 'no flow deleted');
      assert.equal(nameOf(await probe(heldPort)), a0!.name, 'the held flow keeps its endpoint');

      const replaced = await restarted.sync(state([dns([a1!, b0!])]), 'incremental');
      assert.equal(await flowsTo(a0!.ipv4), 0, "the replaced endpoint's flows are gone");
      assert.equal(await flowsTo(b0!.ipv4), toB0, "the remaining endpoint's flows are kept");
      assert.equal(replaced.conntrack[0]?.deleted, toA0);
      const moved = nameOf(await probe(heldPort));
      assert.ok(
        moved === a1!.name || moved === b0!.name,
        `a held flow to the gone endpoint moves on: ${moved}`,
      );
    });

    test('scaled to zero: every flow goes and a held flow is rejected; a new endpoint gets it; a deleted service loses its flows', async () => {
      const [a0] = topo.nodes[0]!.pods;
      const [, b1] = topo.nodes[1]!.pods;
      const dp = dataplaneIn(lab, node0);
      await dp.sync(state([dns([a0!])]), 'full');
      assert.equal(nameOf(await probe(41002)), a0!.name);
      assert.ok((await flowsTo()) > 0);

      await dp.sync(state([dns([])]), 'incremental');
      assert.equal(await flowsTo(), 0, 'no flow is left to the service (kubernetes#139628)');
      // Kept, the entry would still carry the held flow to a0, which answers.
      assert.deepEqual(await probe(41002), { error: 'ECONNREFUSED' });

      await dp.sync(state([dns([b1!])]), 'incremental');
      assert.equal(nameOf(await probe(41002)), b1!.name);

      await dp.sync(state([]), 'incremental');
      assert.equal(await flowsTo(), 0, "a deleted service's flows are gone (kubernetes#141371)");

      // Deleted while kproxy was down: known at start-up by its address in the service CIDRs.
      await dp.sync(state([dns([b1!])]), 'incremental');
      assert.equal(nameOf(await probe(41002)), b1!.name);
      const restarted = dataplaneIn(lab, node0);
      await restarted.start();
      await restarted.sync(
        ipv4([], { nodeIPs: [topo.nodes[0]!.ipv4], serviceCIDRs: ['10.96.0.0/16'] }),
        'full',
      );
      assert.equal(await flowsTo(), 0, 'the flows of a Service deleted while kproxy was down are gone');
    });
  });

  test('random incremental sequences and a restart end in the same ruleset as a fresh full sync', async () => {
    const viaSyncs = await lab.addNetns('seq-inc');
    const viaFull = await lab.addNetns('seq-full');
    const seeds = testSeeds();
    process.stdout.write(seedsLine('kernel live sequences', seeds));
    for (const seed of seeds) {
      const random = prng(seed);
      // A cold start in bounded transactions (tiny ones, to have several).
      let dp = dataplaneIn(lab, viaSyncs, 8);
      await dp.start();
      let last = randomState(random);
      await dp.sync(last, 'full');
      for (let i = 0; i < 12; i++) {
        if (i === 6) {
          dp = dataplaneIn(lab, viaSyncs);
          await dp.start();
        }
        last = randomState(random);
        const outcome = await dp.sync(last, i === 6 ? 'full' : 'incremental');
        assert.equal(outcome.kind, i === 6 ? 'full' : 'incremental', `step ${i} of seed ${seed} fell back`);
      }
      assert.equal(await dp.intact(), true);
      assert.deepEqual(fallbacks, []);
      await nftLoad(lab, viaFull, nftablesPlanner.render(nftablesPlanner.planFull(last)));
      // The same endpoints behind every key: their indexes may come from the incremental syncs.
      assert.deepEqual(
        await canonicalRuleset(lab, viaSyncs, { upToNumbering: true }),
        await canonicalRuleset(lab, viaFull, { upToNumbering: true }),
        `seed ${seed}`,
      );
      await lab.exec(viaSyncs, 'nft', ['flush', 'ruleset']);
      assert.equal(await dp.intact(), false, 'a flushed ruleset is noticed');
      await dp.cleanup();
      assert.equal((await lab.exec(viaSyncs, 'nft', ['list', 'tables'])).stdout.trim(), '');
      closeOpened();
    }
  });
});
