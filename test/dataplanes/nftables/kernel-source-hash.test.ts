// ipvs.scheduler sh and mh in nftables mode with real packets (scheduler.ts, endpoint-dispatch.ts,
// maglev.ts): many client addresses reach a ClusterIP and a node port through the live dataplane's
// rules; each lands on the endpoint `kproxy trace` predicts from the rendered rules and from the
// kernel's (the kernel's jhash computed by dataplanes/shared/trace/jhash.ts), every connection of a
// client on the same one, before and after an endpoint goes; with mh a client whose endpoint stays
// keeps it unless the Maglev table moved its slot. Render, loaded alone, gives the live sync's
// ruleset. No seed: the hash is deterministic.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { SOURCE_HASH_SEED } from '../../../dataplanes/nftables/endpoint-dispatch.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { MAGLEV_SLOTS, maglevTable } from '../../../dataplanes/nftables/maglev.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { createNftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import type { EndpointHash } from '../../../dataplanes/nftables/scheduler.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { addressBytes } from '../../../dataplanes/shared/nft/element-encoding.ts';
import { nftJhash } from '../../../dataplanes/shared/trace/jhash.ts';
import type { TracePacket } from '../../../dataplanes/shared/trace/packet.ts';
import { Lab } from '../../../harness/netns.ts';
import { CLUSTER_CIDR_V4, type PodInfo, Topology } from '../../../harness/topology.ts';
import { readLiveRules, traceRuleText } from '../../../src/cli/trace.ts';
import { checkFlow, comparable, inBatches } from '../../trace/flow-check.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces and nft';
/** Client addresses, added to the client namespace's eth0 (10.100.1.1 ...). */
const CLIENTS = 48;
const CONNECTIONS_PER_CLIENT = 2;
const IN_FLIGHT = 16;

describe('nftables source and consistent hashing (ipvs.scheduler sh, mh) with real packets', {
  skip: isRoot ? false : ROOT_REASON,
}, () => {
  let lab: Lab;
  let topo: Topology;
  const sources = Array.from({ length: CLIENTS }, (_, i) => `10.100.1.${i + 1}`);

  function stateOf(pods: readonly PodInfo[]): DualStackState {
    const node = topo.nodes[0]!;
    const web = servicePort('web', {
      clusterIP: '10.96.0.40',
      nodePort: 30040,
      clusterEndpoints: pods.map((p) => endpoint(p.ipv4, 8080, { isLocal: p.nodeName === node.name })),
    });
    return {
      IPv4: proxyState('IPv4', [web], {
        nodeName: node.name,
        nodeIPs: [node.ipv4],
        localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
      }),
    };
  }

  /**
   * Every client's connections to the ClusterIP and the node port answer from the one endpoint the
   * trace predicts from `rendered` (render's script of the node's rules) and from the kernel's rules
   * (trace --live), the same for both; returns the pod each client reached.
   */
  async function checkClients(rendered: string): Promise<Map<string, string>> {
    const node = topo.nodes[0]!;
    const commands = execaRunner(['ip', 'netns', 'exec', node.ns]);
    const live = await readLiveRules('nftables', commands);
    const host = { localAddresses: [node.ipv4, '10.244.1.1'] };
    const podOf = new Map(topo.nodes.flatMap((n) => n.pods).map((pod) => [`${pod.ipv4}:8080`, pod.name]));
    const answered = new Map<string, string>();
    const flows = sources.flatMap((source) => [
      { source, destination: '10.96.0.40', port: 80 },
      { source, destination: node.ipv4, port: 30040 },
    ]);
    await inBatches(flows, IN_FLIGHT, async ({ source, destination, port }) => {
      const packet: TracePacket = {
        source,
        sourcePort: 40000,
        destination,
        port,
        protocol: 'tcp',
        via: 'external',
      };
      const predicted = traceRuleText('nftables', rendered, packet, host).branches.map((b) => b.outcome);
      const what = `${source} -> ${destination}:${port}, predicted ${JSON.stringify(predicted)}`;
      assert.equal(predicted.length, 1, `${what}: one endpoint per client, not a random pick`);
      const fromKernel = traceRuleText('nftables', live, packet, host).branches.map((b) => b.outcome);
      assert.deepEqual(
        comparable(fromKernel),
        comparable(predicted),
        `${what}: the kernel's rules predict the same`,
      );
      const seen = await topo.connect(topo.client.ns, 'tcp', destination, port, {
        count: CONNECTIONS_PER_CLIENT,
        source,
      });
      checkFlow(what, predicted, seen, source, podOf, host.localAddresses);
      for (const s of seen) {
        if (!('name' in s)) continue;
        assert.equal(
          answered.get(source) ?? s.name,
          s.name,
          `${what}: the ClusterIP's endpoint and the node port's`,
        );
        answered.set(source, s.name);
      }
    });
    return answered;
  }

  before(async () => {
    lab = new Lab('nftsh');
    topo = await Topology.create(lab, { podsPerNode: [3, 1] });
    for (const pod of topo.nodes.flatMap((n) => n.pods)) await topo.startEcho(pod, { tcp: [8080] });
    await lab.addRoute(topo.client.ns, ['10.96.0.0/16', 'via', topo.nodes[0]!.ipv4]);
    for (const source of sources) await lab.addAddress(topo.client.ns, 'eth0', `${source}/32`);
  });

  /** What render prints for `state`, loaded into a namespace of its own, is what the live sync left on node-0. */
  async function checkRenderIsLive(rendered: string, name: string): Promise<void> {
    const ns = await lab.addNetns(name);
    await nftLoad(lab, ns, rendered);
    assert.deepEqual(await canonicalRuleset(lab, ns), await canonicalRuleset(lab, topo.nodes[0]!.ns));
  }

  /** The live dataplane of node-0 as `kproxy run --ipvs-scheduler` builds it; it adopts what is there. */
  async function dataplaneWith(endpointHash: EndpointHash): Promise<NftablesDataplane> {
    const commands = execaRunner(['ip', 'netns', 'exec', topo.nodes[0]!.ns]);
    const dataplane = new NftablesDataplane({ nft: commandNftRunner(commands), commands, endpointHash });
    await dataplane.start();
    return dataplane;
  }
  after(() => lab?.destroy());

  test('sh: each client address keeps one endpoint, the one the trace predicts; clients spread over all', async () => {
    const planner = createNftablesPlanner({ scheduler: 'sh' });
    const dataplane = await dataplaneWith('source');
    const pods = topo.nodes.flatMap((n) => n.pods);
    const state = stateOf(pods);
    await dataplane.sync(state, 'full');
    await checkRenderIsLive(planner.render(planner.planFull(state)), 'render-sh');
    const answered = await checkClients(planner.render(planner.planFull(state)));
    // The hash is deterministic: these 48 addresses are known to reach every one of the 4 pods.
    assert.deepEqual([...new Set(answered.values())].sort(), pods.map((p) => p.name).sort());

    // One endpoint goes (an incremental sync): the rest still answer as predicted, it never does.
    // The prediction is render's full script with the endpoints in the slots the live sync left
    // (the last one fills the hole: endpoint-slots.ts).
    const kept = pods.filter((_, i) => i !== 1);
    const next = stateOf(kept);
    await dataplane.sync(next, 'incremental', new Set(next.IPv4!.servicePorts.keys()));
    const slotted = [...kept];
    slotted.splice(1, 0, slotted.pop()!);
    const after = await checkClients(planner.render(planner.planFull(stateOf(slotted))));
    assert.deepEqual([...new Set(after.values())].sort(), kept.map((p) => p.name).sort());
  });

  test('mh: clients land where the trace predicts; after an endpoint goes, the others keep theirs but for moved slots', async () => {
    const planner = createNftablesPlanner({ scheduler: 'mh' });
    const dataplane = await dataplaneWith('consistent');
    const pods = topo.nodes.flatMap((n) => n.pods);
    const state = stateOf(pods);
    await dataplane.sync(state, 'full');
    await checkRenderIsLive(planner.render(planner.planFull(state)), 'render-mh');
    const first = await checkClients(planner.render(planner.planFull(state)));
    assert.deepEqual([...new Set(first.values())].sort(), pods.map((p) => p.name).sort());

    const [kept, gone] = [pods.filter((_, i) => i !== 1), pods[1]!];
    const next = stateOf(kept);
    await dataplane.sync(next, 'incremental', new Set(next.IPv4!.servicePorts.keys()));
    // No slot order to follow: the table is the set's.
    const second = await checkClients(planner.render(planner.planFull(next)));
    const owners = (members: readonly PodInfo[]) =>
      maglevTable(members.map((p) => `${p.ipv4}:8080`)).map((i) => members[i]!.name);
    const [before, after] = [owners(pods), owners(kept)];
    let moved = 0;
    for (const [source, pod] of first) {
      if (pod === gone.name) continue;
      const slot = nftJhash(addressBytes(source), MAGLEV_SLOTS, Number(SOURCE_HASH_SEED), 0);
      assert.equal(before[slot], pod, `${source}: slot ${slot}`);
      if (after[slot] === before[slot]) assert.equal(second.get(source), pod, `${source} keeps ${pod}`);
      else moved++;
    }
    // 4 -> 3 endpoints: a pick by mod N would move about two thirds of them.
    const stayed = [...first.values()].filter((pod) => pod !== gone.name).length;
    assert.ok(moved <= stayed / 4, `${moved} of ${stayed} clients moved between endpoints that stayed`);
  });
});
