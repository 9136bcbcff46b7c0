// Tampering with the live nftables dataplane's table on a real kernel, with real packets: each kind
// of damage breaks traffic, intact() notices it, and the repair the sync loop then runs (a full
// sync, see src/sync/sync-loop.ts) brings traffic back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { EXTRA_RULE_PROBES } from '../../../dataplanes/nftables/intact-check.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { Lab } from '../../../harness/netns.ts';
import { CLUSTER_CIDR_V4, Topology, tally } from '../../../harness/topology.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED nftables tamper tests: ${ROOT_REASON}\n`);

const WEB_IP = '10.96.0.10';
const LB_IP = '203.0.113.10';

describe('nftables tampering is detected and repaired', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let topo: Topology;
  let state: DualStackState;
  const node = () => topo.nodes[0]!;

  function dataplane(): NftablesDataplane {
    const commands = execaRunner(['ip', 'netns', 'exec', node().ns]);
    return new NftablesDataplane({ nft: commandNftRunner(commands), commands });
  }

  /** Names of the pods that answered `count` connections to the web ClusterIP (errors too). */
  async function webAnswers(count: number, timeoutMs?: number): Promise<string[]> {
    const outcomes = await topo.connect(topo.client.ns, 'tcp', WEB_IP, 80, { count, timeoutMs });
    return [...tally(outcomes).keys()].sort();
  }

  before(async () => {
    lab = new Lab('nfttamper');
    topo = await Topology.create(lab, { podsPerNode: [2] });
    const pods = node().pods;
    for (const p of pods) await topo.startEcho(p, { tcp: [8080] });
    await lab.addRoute(topo.client.ns, ['10.96.0.0/16', 'via', node().ipv4]);
    await lab.addRoute(topo.client.ns, [`${LB_IP}/32`, 'via', node().ipv4]);
    const endpoints = pods.map((p) => endpoint(p.ipv4, 8080, { isLocal: true }));
    state = {
      IPv4: proxyState(
        'IPv4',
        [
          servicePort('web', { clusterIP: WEB_IP, nodePort: 30080, clusterEndpoints: endpoints }),
          servicePort('dns', {
            clusterIP: '10.96.0.53',
            protocol: 'UDP',
            port: 53,
            clusterEndpoints: endpoints.map((e) => ({ ...e, port: 5353 })),
          }),
          // Affinity: chains of its own and a set that packets fill, which the check must not mind.
          servicePort('sticky', {
            clusterIP: '10.96.0.30',
            sessionAffinity: { timeoutSeconds: 600 },
            clusterEndpoints: endpoints,
          }),
          servicePort('empty', { clusterIP: '10.96.0.99', nodePort: 30099 }),
          // Source ranges: an interval set (firewall-allow) lets the client in.
          servicePort('lb', {
            clusterIP: '10.96.0.40',
            loadBalancerIPs: [LB_IP],
            loadBalancerSourceRanges: ['10.100.0.0/24'], // the client's
            clusterEndpoints: endpoints,
          }),
        ],
        {
          nodeName: node().name,
          nodeIPs: [node().ipv4],
          localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
        },
      ),
    };
  });
  after(() => lab?.destroy());

  const BOTH = ['node-0-pod-0', 'node-0-pod-1'];

  /** Whether `count` connections to the LoadBalancer IP all timed out (the firewall drops them). */
  async function lbAnswers(count: number, timeoutMs?: number): Promise<string[]> {
    const outcomes = await topo.connect(topo.client.ns, 'tcp', LB_IP, 80, { count, timeoutMs });
    return [...tally(outcomes).keys()].sort();
  }

  const tampering: readonly {
    readonly what: string;
    readonly nft: readonly string[];
    /** The LoadBalancer IP breaks rather than the web ClusterIP. */
    readonly lb?: boolean;
  }[] = [
    { what: 'the table deleted', nft: ['delete', 'table', 'ip', 'kproxy'] },
    { what: 'the table flushed (rules gone, sets kept)', nft: ['flush', 'table', 'ip', 'kproxy'] },
    { what: 'one chain flushed', nft: ['flush', 'chain', 'ip', 'kproxy', 'cluster-ip'] },
    { what: 'a chain deleted', nft: ['delete', 'chain', 'ip', 'kproxy', 'nat-prerouting'] },
    { what: 'the service map flushed', nft: ['flush', 'map', 'ip', 'kproxy', 'service-ips'] },
    // A key with no count meets no DNAT (endpoint-dispatch.ts): every counted Service breaks.
    { what: 'the counts map flushed', nft: ['flush', 'map', 'ip', 'kproxy', 'backends-tcp-counts'] },
    {
      what: 'one endpoint map element deleted',
      nft: ['delete', 'element', 'ip', 'kproxy', 'backends-tcp', `{ ${WEB_IP} . 80 . 0 }`],
    },
    {
      what: 'one endpoint map element given another value',
      nft: ['-f', '-'],
    },
    {
      what: 'a source range deleted from the interval set',
      nft: ['delete', 'element', 'ip', 'kproxy', 'firewall-allow', `{ ${LB_IP} . tcp . 80 . 10.100.0.0/24 }`],
      lb: true,
    },
  ];
  /** What `nft -f -` gets for the value change: endpoint 0 of web becomes an address nobody has. */
  const VALUE_CHANGE =
    `delete element ip kproxy backends-tcp { ${WEB_IP} . 80 . 0 }\n` +
    `add element ip kproxy backends-tcp { ${WEB_IP} . 80 . 0 : 10.244.99.99 . 8080 }\n`;

  for (const { what, nft, lb } of tampering) {
    test(`${what}: traffic breaks, intact() says so, the repair sync brings traffic back`, async () => {
      const dp = dataplane();
      await dp.start();
      await dp.sync(state, 'full');
      assert.deepEqual(await webAnswers(20), BOTH);
      await topo.connect(topo.client.ns, 'tcp', '10.96.0.30', 80);
      // Random picks: 24 on one of two endpoints 1 in 2^23 (12 were 1 in 2048).
      if (lb) assert.deepEqual(await lbAnswers(24), BOTH, 'the client is in the source range');
      assert.equal(await dp.intact(), true, 'intact before the tampering (affinity set filled)');

      await lab.exec(node().ns, 'nft', nft, nft[0] === '-f' ? { input: VALUE_CHANGE } : {});
      // A timeout, or a refusal where the ClusterIP check rejects what was not DNATed.
      const failed = (answers: string[]) => answers.some((answer) => answer.startsWith('error:'));
      // Each attempt picks an endpoint at random: with one of two gone, 12 all succeed 1 in 4096,
      // so another 12 are tried then (1 in 2^24), and only then (a failed one waits 300 ms).
      let broken = lb ? await lbAnswers(2, 300) : await webAnswers(12, 300);
      if (!lb && !failed(broken)) broken = await webAnswers(12, 300);
      assert.ok(failed(broken), `the tampering breaks traffic: ${broken}`);
      // The broken attempts' conntrack entries (unDNATed, or DNATed to nobody) would send a later
      // SYN from the same client port the same way for 120 s, past the repair: client ports come
      // from a sequence that can come back to one (test/dataplanes/iptables/tamper.test.ts).
      await lab.exec(node().ns, 'conntrack', ['-F']);
      assert.equal(await dp.intact(), false, 'noticed by the intact check');
      assert.equal(await dp.intact(), false, 'and again until repaired');

      // What the sync loop does when the check fails.
      const outcome = await dp.sync(state, 'full');
      assert.equal(outcome.kind, 'full');
      assert.equal(await dp.intact(), true);
      assert.deepEqual(await (lb ? lbAnswers(20) : webAnswers(20)), BOTH, 'traffic works again');
    });
  }

  test('a rule added to one of our chains: found within (chains / probes per check) checks, then repaired', async () => {
    const dp = dataplane();
    await dp.start();
    await dp.sync(state, 'full');
    assert.equal(await dp.intact(), true);
    await lab.exec(node().ns, 'nft', ['insert', 'rule', 'ip', 'kproxy', 'cluster-ip', 'drop']);
    assert.deepEqual(await webAnswers(2, 300), ['error:timeout'], 'the rule breaks traffic');
    const { stdout } = await lab.exec(node().ns, 'nft', ['-j', 'list', 'chains', 'ip']);
    const chains = (JSON.parse(stdout) as { nftables: object[] }).nftables.filter((o) => 'chain' in o).length;
    // Each check asks EXTRA_RULE_PROBES chains, in turns.
    const bound = Math.ceil(chains / EXTRA_RULE_PROBES);
    let checks = 1;
    while (await dp.intact()) {
      checks++;
      assert.ok(checks <= bound, `not found within ${bound} checks`);
    }
    await dp.sync(state, 'full');
    assert.equal(await dp.intact(), true);
    assert.deepEqual(await webAnswers(20), BOTH, 'traffic works again');
  });

  test('every element is checked within a bounded number of checks, whatever the size', async () => {
    // A state of 300 ports in a table whose element budget per check is far smaller.
    const many = new Map(state.IPv4!.servicePorts);
    for (let i = 0; i < 300; i++) {
      const sp = servicePort(`svc-${i}`, {
        clusterIP: `10.97.${i >> 8}.${i & 255}`,
        clusterEndpoints: [endpoint(`10.244.9.${(i % 250) + 1}`, 8080)],
      });
      many.set(sp.key, sp);
    }
    const big: DualStackState = { IPv4: { ...state.IPv4!, servicePorts: many } };
    const dp = dataplane();
    await dp.start();
    await dp.sync(big, 'full');
    assert.equal(await dp.intact(), true);
    // The last service's endpoint element: the turns reach it within (elements / budget) checks.
    await lab.exec(node().ns, 'nft', [
      'delete',
      'element',
      'ip',
      'kproxy',
      'backends-tcp',
      '{ 10.97.1.43 . 80 . 0 }',
    ]);
    let checks = 0;
    while ((await dp.intact()) && checks < 10) checks++;
    assert.ok(checks < 10, `found within ${checks + 1} checks`);
    await dp.sync(big, 'full');
    assert.equal(await dp.intact(), true);
    await dp.cleanup();
  });
});
