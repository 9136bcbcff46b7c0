// The live nftables dataplane on a real kernel: syncs through `nft` inside lab namespaces.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { Lab } from '../../../harness/netns.ts';
import { type PodInfo, Topology, tally } from '../../../harness/topology.ts';
import { heldConnection } from '../../../lab/echo-output.ts';
import type { DualStackState, ServicePort } from '../../../src/model/proxy-state.ts';
import { prng } from '../../support/prng.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';
import { randomState } from './random-state.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces, nft and conntrack (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nftables live kernel tests: ${ROOT_REASON}\n`);

/** Fallbacks logged by any dataplane of this file: each one is a planning bug. */
const fallbacks: string[] = [];

function dataplaneIn(ns: string, coldStartChunk?: number): NftablesDataplane {
  const commands = execaRunner(['ip', 'netns', 'exec', ns]);
  const log = (message: string, fields?: Readonly<Record<string, unknown>>) => {
    if (message.includes('falling back')) fallbacks.push(`${message} ${JSON.stringify(fields)}`);
  };
  return new NftablesDataplane({ nft: commandNftRunner(commands), commands, log, coldStartChunk });
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
  after(() => lab?.destroy());

  test('a long-lived TCP connection keeps its backend through endpoint changes, resyncs and a restart', async () => {
    const [a0, a1] = topo.nodes[0]!.pods;
    const [b0, b1] = topo.nodes[1]!.pods;
    const dp = dataplaneIn(node0);
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
    const restarted = dataplaneIn(node0);
    await restarted.start();
    await restarted.sync(state([web([kept, b1!])]), 'full');
    assert.equal(await tableHandle(), handleBefore, 'the adopted table was reconciled, not replaced');
    assert.ok(await held.alive(), `the connection still echoes: ${holder.output()}`);
    await held.close();

    const fresh = await topo.connect(topo.client.ns, 'tcp', '10.96.0.10', 80, { count: 30 });
    assert.deepEqual([...tally(fresh).keys()], [kept.name, b1!.name].sort());
  });

  test("a removed UDP backend's conntrack entry is gone after the sync", async () => {
    const [a0] = topo.nodes[0]!.pods;
    const [b0] = topo.nodes[1]!.pods;
    const dp = dataplaneIn(node0);
    await dp.sync(state([dns([a0!])]), 'full');
    assert.equal(
      (await topo.connect(topo.client.ns, 'udp', '10.96.0.53', 53))[0]?.['name' as never],
      a0!.name,
    );
    const flows = async () =>
      (
        await lab.exec(
          node0,
          'conntrack',
          ['-L', '-p', 'udp', '--orig-dst', '10.96.0.53', '--reply-src', a0!.ipv4],
          {
            reject: false,
          },
        )
      ).stdout
        .split('\n')
        .filter((l) => l.includes('udp')).length;
    assert.ok((await flows()) > 0, 'the flow is tracked');
    const outcome = await dp.sync(state([dns([b0!])]), 'incremental');
    assert.ok(outcome.conntrackEntriesDeleted >= 1, JSON.stringify(outcome));
    assert.equal(await flows(), 0);
  });

  test('after a restart only the UDP flows of an endpoint gone while we were down are deleted', async () => {
    const [, a1] = topo.nodes[0]!.pods;
    const [, b1] = topo.nodes[1]!.pods;
    const dp = dataplaneIn(node0);
    await dp.sync(state([dns([a1!, b1!])]), 'full');
    // Each attempt is a new socket, so a new flow to a random backend: both get some.
    await topo.connect(topo.client.ns, 'udp', '10.96.0.53', 53, { count: 20 });
    const flowsTo = async (ip: string) =>
      (
        await lab.exec(
          node0,
          'conntrack',
          ['-L', '-p', 'udp', '--orig-dst', '10.96.0.53', '--reply-src', ip],
          {
            reject: false,
          },
        )
      ).stdout
        .split('\n')
        .filter((l) => l.includes('udp')).length;
    assert.ok((await flowsTo(a1!.ipv4)) > 0 && (await flowsTo(b1!.ipv4)) > 0, 'flows to both backends');
    const restarted = dataplaneIn(node0);
    await restarted.start();
    await restarted.sync(state([dns([b1!])]), 'full');
    assert.equal(await flowsTo(a1!.ipv4), 0, 'the gone endpoint lost its flows');
    assert.ok((await flowsTo(b1!.ipv4)) > 0, 'the kept endpoint kept its flows');
  });

  test('random incremental sequences and a restart end in the same ruleset as a fresh full sync', async (t) => {
    const viaSyncs = await lab.addNetns('seq-inc');
    const viaFull = await lab.addNetns('seq-full');
    const seed = Number(process.env.NFT_SEED ?? Date.now() % 100000);
    t.diagnostic(`seed ${seed} (NFT_SEED=${seed} to repeat)`);
    const random = prng(seed);
    // A cold start in bounded transactions (tiny ones, to have several).
    let dp = dataplaneIn(viaSyncs, 8);
    await dp.start();
    let last = randomState(random);
    await dp.sync(last, 'full');
    for (let i = 0; i < 12; i++) {
      if (i === 6) {
        dp = dataplaneIn(viaSyncs);
        await dp.start();
      }
      last = randomState(random);
      const outcome = await dp.sync(last, i === 6 ? 'full' : 'incremental');
      assert.equal(outcome.kind, i === 6 ? 'full' : 'incremental', `step ${i} of seed ${seed} fell back`);
    }
    assert.equal(await dp.intact(), true);
    assert.deepEqual(fallbacks, []);
    await nftLoad(lab, viaFull, nftablesPlanner.render(nftablesPlanner.planFull(last)));
    assert.deepEqual(
      await canonicalRuleset(lab, viaSyncs),
      await canonicalRuleset(lab, viaFull),
      `seed ${seed}`,
    );
    await lab.exec(viaSyncs, 'nft', ['flush', 'ruleset']);
    assert.equal(await dp.intact(), false, 'a flushed ruleset is noticed');
    await dp.cleanup();
    assert.equal((await lab.exec(viaSyncs, 'nft', ['list', 'tables'])).stdout.trim(), '');
  });
});
