// ClientIP session affinity with real packets (affinity.ts): a client keeps its endpoint, forgets
// it after the timeout, is released by an endpoint that goes away (and kept when another one
// does), is remembered per service, and a changed timeout applies. Changes go through the
// incremental plan, as the live dataplane's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DualStackState, ServicePort } from '../../../contract/proxy-state.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import type { EchoOutcome } from '../../../harness/echo-client.ts';
import { Lab } from '../../../harness/netns.ts';
import {
  CLUSTER_CIDR_V4,
  CLUSTER_CIDR_V6,
  type PodInfo,
  Topology,
  tally,
} from '../../../harness/topology.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';
import { nftLoad } from './kernel-support.ts';
import { plannerAfterFullSync } from './planner-with-slots.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces and nft';
if (!isRoot) process.stderr.write(`SKIPPED nftables affinity tests: ${ROOT_REASON}\n`);

/**
 * The short timeout under test; the kernel expires an element within a jiffy of it. A client's
 * element must still be listed after its connections: an nft process start, ~20 ms of CPU and a
 * few wake-ups, ~0.2 s at the design load (harness/emulation.ts; ~1.4 s seen at load 53).
 */
const SHORT_TIMEOUT_S = 2;
/** The wait past the short timeout: its expiry, plus a margin for a loaded machine. */
const PAST_TIMEOUT_MS = SHORT_TIMEOUT_S * 1000 + 1500;

function names(outcomes: readonly EchoOutcome[]): string[] {
  return [...tally(outcomes).keys()];
}

describe('nftables ClientIP affinity with real packets', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let topo: Topology;
  let pods: PodInfo[];
  let state: DualStackState;
  const client = () => topo.client.ns;
  const node = () => topo.nodes[0]!;

  function port(
    name: string,
    clusterIP: string,
    members: readonly PodInfo[],
    timeout: number,
    extra: Partial<ServicePort> = {},
  ) {
    const target = extra.protocol === 'UDP' ? 5353 : 8080;
    return servicePort(name, {
      clusterIP,
      sessionAffinity: { timeoutSeconds: timeout },
      clusterEndpoints: members.map((p) => endpoint(p.ipv4, target, { isLocal: p.nodeName === 'node-0' })),
      ...extra,
    });
  }

  function stateOf(ports: readonly ServicePort[], v6Members: readonly PodInfo[]): DualStackState {
    const v6 = servicePort('sticky6', {
      clusterIP: 'fd00:96::30',
      sessionAffinity: { timeoutSeconds: 600 },
      clusterEndpoints: v6Members.map((p) => endpoint(p.ipv6, 8080, { isLocal: p.nodeName === 'node-0' })),
    });
    const n = node();
    return {
      IPv4: proxyState('IPv4', ports, {
        nodeName: n.name,
        nodeIPs: [n.ipv4],
        localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
      }),
      IPv6: proxyState('IPv6', [v6], {
        nodeName: n.name,
        nodeIPs: [n.ipv6],
        localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V6] },
      }),
    };
  }

  // As the live dataplane: each plan starts from the endpoint slots the ones before it left.
  const planner = plannerAfterFullSync();
  async function sync(next: DualStackState): Promise<void> {
    await nftLoad(lab, node().ns, planner.render(planner.planIncremental(state, next)));
    state = next;
  }

  /** Every connection reaches one endpoint; which. */
  async function stickyEndpoint(host: string, port: number, count = 12, proto: 'tcp' | 'udp' = 'tcp') {
    const outcomes = await topo.connect(client(), proto, host, port, { count });
    const seen = names(outcomes);
    assert.equal(seen.length, 1, JSON.stringify([...tally(outcomes)]));
    assert.ok(!seen[0]!.startsWith('error'), seen[0]);
    return seen[0]!;
  }

  before(async () => {
    lab = new Lab('nftaff');
    topo = await Topology.create(lab, { podsPerNode: [3, 2] });
    pods = topo.nodes.flatMap((n) => n.pods);
    for (const p of pods) await topo.startEcho(p, { tcp: [8080, 8081], udp: [5353] });
    await lab.addRoute(client(), ['10.96.0.0/16', 'via', node().ipv4]);
    await lab.addRoute(client(), ['fd00:96::/64', 'via', node().ipv6]);
    state = stateOf(
      [
        port('sticky', '10.96.0.30', pods, 600, { nodePort: 30030 }),
        port('other', '10.96.0.31', pods, 600),
        port('short', '10.96.0.32', pods, SHORT_TIMEOUT_S),
        port('dns', '10.96.0.33', pods, 600, { protocol: 'UDP', port: 53 }),
        // Endpoints on two ports (a named target port): address . port per endpoint.
        port('mixed', '10.96.0.34', pods, 600, {
          clusterEndpoints: pods.map((p, i) =>
            endpoint(p.ipv4, 8080 + (i % 2), { isLocal: p.nodeName === 'node-0' }),
          ),
        }),
      ],
      pods,
    );
    await nftLoad(lab, node().ns, nftablesPlanner.render(nftablesPlanner.planFull(state)));
  });
  after(() => lab?.destroy());

  test('a client keeps one endpoint over many connections: ClusterIP, node port, UDP, IPv6', async () => {
    await stickyEndpoint('10.96.0.30', 80, 30);
    await stickyEndpoint('10.96.0.33', 53, 20, 'udp');
    await stickyEndpoint(node().ipv4, 30030, 20);
    await stickyEndpoint('fd00:96::30', 80, 20);
  });

  test('without affinity state the choice is random: a fresh client spreads over endpoints', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 12 && seen.size < 2; i++) {
      await lab.exec(node().ns, 'nft', ['flush', 'set', 'ip', 'kproxy', 'affinity-clients']);
      seen.add(await stickyEndpoint('10.96.0.31', 80, 1));
    }
    // Five endpoints: twelve picks on one endpoint happen with probability 5^-11.
    assert.ok(seen.size >= 2, [...seen].join());
  });

  test('several services remember the same client apart, each sticking', async () => {
    const first = await stickyEndpoint('10.96.0.30', 80);
    await stickyEndpoint('10.96.0.31', 80);
    assert.equal(await stickyEndpoint('10.96.0.30', 80), first);
  });

  test('endpoints on different ports: a client keeps one, a fresh client spreads', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 12 && seen.size < 2; i++) {
      await lab.exec(node().ns, 'nft', ['flush', 'set', 'ip', 'kproxy', 'affinity-clients']);
      seen.add(await stickyEndpoint('10.96.0.34', 80, 8));
    }
    assert.ok(seen.size >= 2, [...seen].join());
  });

  test('an endpoint that goes away releases its clients, who stick to another', async () => {
    const chosen = await stickyEndpoint('10.96.0.30', 80);
    const rest = pods.filter((p) => p.name !== chosen);
    const ports = [...state.IPv4!.servicePorts.values()];
    await sync(
      stateOf(
        ports.map((sp) =>
          sp.key.includes('sticky') ? port('sticky', '10.96.0.30', rest, 600, { nodePort: 30030 }) : sp,
        ),
        pods,
      ),
    );
    const next = await stickyEndpoint('10.96.0.30', 80);
    assert.notEqual(next, chosen);
    // Another endpoint going away (4 -> 3, the same remembered-4 checks) keeps the client.
    const dropped = rest.find((p) => p.name !== next);
    const kept = rest.filter((p) => p !== dropped);
    const current = [...state.IPv4!.servicePorts.values()];
    await sync(
      stateOf(
        current.map((sp) =>
          sp.key.includes('sticky') ? port('sticky', '10.96.0.30', kept, 600, { nodePort: 30030 }) : sp,
        ),
        pods,
      ),
    );
    assert.equal(kept.length, 3);
    assert.equal(await stickyEndpoint('10.96.0.30', 80), next);
  });

  test('a client is forgotten after the timeout; a changed timeout applies', async () => {
    const listClients = async () =>
      (await lab.exec(node().ns, 'nft', ['list', 'set', 'ip', 'kproxy', 'affinity-clients'])).stdout;
    await stickyEndpoint('10.96.0.32', 80, 3);
    assert.match(await listClients(), /10\.96\.0\.32 \. tcp \. 80/);
    await sleep(PAST_TIMEOUT_MS);
    assert.doesNotMatch(await listClients(), /10\.96\.0\.32 \. tcp \. 80/);
    // 600 s -> 2 s on "other": the client's next connection is remembered for 2 s only.
    const ports = [...state.IPv4!.servicePorts.values()];
    await sync(
      stateOf(
        ports.map((sp) =>
          sp.key.includes('other') ? port('other', '10.96.0.31', pods, SHORT_TIMEOUT_S) : sp,
        ),
        pods,
      ),
    );
    await stickyEndpoint('10.96.0.31', 80, 2);
    // nft prints what is left as "1s984ms", "2s" or, past a second, "624ms".
    assert.match(
      await listClients(),
      /10\.96\.0\.31 \. tcp \. 80 \. [0-9.]+ timeout 2s expires (?:[0-2]s|(?:1s)?\d+ms)[,\s]/,
    );
    await sleep(PAST_TIMEOUT_MS);
    assert.doesNotMatch(await listClients(), /10\.96\.0\.31 \. tcp \. 80/);
  });
});
