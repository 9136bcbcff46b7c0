// Kernel test (issue 32): the drift report spells the render as iptables-save lists it without
// restoring it anywhere (dataplanes/iptables/saved-spelling.ts), so the spelling must be the
// kernel's tools' own, rule by rule. Renders are restored into an empty namespace (with the nfacct
// objects, as `kproxy run` makes them) and saved back, on each backend and in both families: every
// chain's rules, in order, equal the render's respelled. The renders: every golden scenario, the
// bundled example, edges (a /0 source range, SCTP, REJECT and eTP Local in both families, IPv6
// addresses inet_ntop writes dotted, node port addresses), a large cluster (no per-endpoint
// comments), and per seed a random dual-stack state and a random IPv4 one under random node
// settings (each local-traffic detector, a masquerade bit, localhost node ports and their counter,
// the INVALID drop counter, liberal conntrack). Then the drift report on that namespace, from the
// backend it picks, finds nothing: no piece, no foreign rule.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/saved-spelling-kernel.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DualStackState, LocalTrafficDetector, ProxyState } from '../../../contract/proxy-state.ts';
import { iptablesDrift } from '../../../dataplanes/iptables/drift.ts';
import { NFACCT_INPUT } from '../../../dataplanes/iptables/nfacct-objects.ts';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { savedSpelling } from '../../../dataplanes/iptables/saved-spelling.ts';
import { type IptablesTables, parseIptablesRuleset } from '../../../dataplanes/iptables/trace-ruleset.ts';
import { servicePortsOf } from '../../../dataplanes/shared/drift/drift-report.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { endpoint, proxyState, servicePort } from '../../../harness/proxy-states.ts';
import { main } from '../../../src/cli/main.ts';
import { captureIO } from '../../cli/capture-io.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { randomState as randomDualStack } from '../nftables/random-state.ts';
import { randomState } from './random-states.ts';
import { renderedInputs } from './rendered-inputs.ts';
import { SCENARIOS } from './scenarios.ts';

const EDGES: DualStackState = {
  IPv4: proxyState(
    'IPv4',
    [
      servicePort('open', {
        namespace: 'e',
        clusterIP: '10.96.0.77',
        nodePort: 30111,
        loadBalancerIPs: ['192.0.2.77'],
        loadBalancerSourceRanges: ['0.0.0.0/0', '10.100.0.0/24'],
        sessionAffinity: { timeoutSeconds: 5 },
        clusterEndpoints: [endpoint('10.244.1.1'), endpoint('10.244.2.2')],
      }),
      servicePort('sctp', {
        namespace: 'e',
        protocol: 'SCTP',
        clusterIP: '10.96.3.255',
        clusterEndpoints: [endpoint('10.244.1.3')],
      }),
      servicePort('none', {
        namespace: 'e',
        clusterIP: '10.96.0.78',
        externalIPs: ['192.0.2.78'],
        nodePort: 30112,
        loadBalancerIPs: ['192.0.2.79'],
      }),
    ],
    { localhostNodePorts: true, localhostNodePortsCounted: true, invalidDropsCounted: true },
  ),
  IPv6: proxyState(
    'IPv6',
    [
      servicePort('open', {
        namespace: 'e',
        clusterIP: 'fd00:96::77',
        nodePort: 30111,
        loadBalancerIPs: ['2001:db8::77'],
        loadBalancerSourceRanges: ['::/0', 'fd00:100::/64'],
        sessionAffinity: { timeoutSeconds: 5 },
        // Six zero groups first: inet_ntop writes the last 32 bits dotted (::0.1.0.2).
        clusterEndpoints: [endpoint('::1:2'), endpoint('fd00:0:0:1::', 8080, { isLocal: true })],
      }),
      servicePort('dns', {
        namespace: 'e',
        protocol: 'UDP',
        port: 53,
        clusterIP: '::a:b',
        clusterEndpoints: [endpoint('1:0:0:1:0:0:0:1', 53)],
      }),
      servicePort('local', {
        namespace: 'e',
        clusterIP: 'fd00:96::78',
        externalIPs: ['2001:db8::78'],
        nodePort: 30112,
        loadBalancerIPs: ['2001:db8::79'],
        externalPolicyLocal: true,
        clusterEndpoints: [endpoint('fd00:244:2::5')],
      }),
      servicePort('none', { namespace: 'e', clusterIP: 'fd00:96::79', nodePort: 30113 }),
    ],
    { nodePortAddresses: ['fd00:100::/64'] },
  ),
};

/**
 * Over 1000 endpoints: kube-proxy's large cluster mode, per-endpoint rules without comments. 4096 of
 * them: the rule that chooses among the last 4096 has p = 2⁻¹², which %.11f rounds on an exact half.
 */
const LARGE: DualStackState = {
  IPv4: proxyState('IPv4', [
    servicePort('big', {
      namespace: 'l',
      clusterIP: '10.96.9.9',
      clusterEndpoints: Array.from({ length: 4096 }, (_, i) => endpoint(`10.200.${i >> 8}.${i & 255}`)),
    }),
  ]),
};

function randomNode(random: () => number, state: ProxyState): ProxyState {
  const v4 = state.family === 'IPv4';
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const pods = v4 ? '10.244.0.0/16' : 'fd00:244::/32';
  const detectors: readonly LocalTrafficDetector[] = [
    { mode: 'ClusterCIDR', cidrs: [pods] },
    { mode: 'ClusterCIDR', cidrs: [pods, v4 ? '10.245.0.0/16' : 'fd00:245::/48'] },
    { mode: 'NodeCIDR', cidrs: [v4 ? '10.244.1.0/24' : 'fd00:244:1::/64'] },
    { mode: 'BridgeInterface', interfaces: ['cbr0'] },
    { mode: 'InterfaceNamePrefix', prefixes: ['veth', 'cali'] },
    { mode: 'None' },
  ];
  return {
    ...state,
    node: {
      ...state.node,
      localDetector: pick(detectors),
      masqueradeBit: pick([0, 5, 14, 31]),
      localhostNodePorts: random() < 0.5,
      localhostNodePortsCounted: random() < 0.5,
      invalidDropsCounted: random() < 0.5,
      conntrackTCPLiberal: random() < 0.3,
    },
  };
}

function randomStates(seed: number): Record<string, DualStackState> {
  const random = prng(seed);
  const dual = randomDualStack(random);
  return {
    [`random dual-stack ${seed}`]: {
      ...(dual.IPv4 && { IPv4: randomNode(random, dual.IPv4) }),
      ...(dual.IPv6 && { IPv6: randomNode(random, dual.IPv6) }),
    },
    [`random IPv4 ${seed}`]: { IPv4: randomNode(random, randomState(random)) },
  };
}

async function exampleRender(): Promise<string> {
  const captured = captureIO();
  assert.equal(await main(['render', '--mode', 'iptables', '--example'], captured.io), 0, captured.stderr());
  return captured.stdout();
}

/** "table chain" → its rules, one line each, for the chains that hold any. */
function ruleLines(tables: IptablesTables, spell: (words: string[]) => string[]): Map<string, string[]> {
  const lines = new Map<string, string[]>();
  for (const [table, chains] of tables)
    for (const [chain, { rules }] of chains)
      if (rules.length > 0)
        lines.set(
          `${table} ${chain}`,
          rules.map((words) => spell(words).join(' ')),
        );
  return lines;
}

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}: every rendered rule, respelled, is what iptables-save lists once it is restored`, async (t) => {
    if (!requireRoot(t, 'network namespaces, iptables and nfacct')) return;
    const seeds = testSeeds();
    process.stdout.write(seedsLine(`iptables-${backend} saved spelling`, seeds));
    const renders: Record<string, { state?: DualStackState; text: string }> = {
      example: { text: await exampleRender() },
    };
    const states = { ...SCENARIOS, edges: EDGES, large: LARGE };
    for (const seed of seeds) Object.assign(states, randomStates(seed));
    for (const [name, state] of Object.entries(states))
      renders[name] = { state, text: iptablesPlanner.render(iptablesPlanner.planFull(state)) };
    const lab = new Lab(`ipt-spell-${backend}`);
    t.after(() => lab.destroy());
    for (const [i, [name, { state, text }]] of Object.entries(renders).entries()) {
      const ns = await lab.addNetns(`node${i}`);
      await lab.exec(ns, 'sh', ['-e'], { input: NFACCT_INPUT.input });
      const inputs = renderedInputs(text);
      for (const { tool, input } of inputs)
        await lab.exec(ns, tool.replace('-restore', `-${backend}-restore`), ['--noflush'], { input });
      for (const family of ['IPv4', 'IPv6'] as const) {
        const base = family === 'IPv4' ? 'iptables' : 'ip6tables';
        const render = inputs
          .filter(({ tool }) => tool === `${base}-restore`)
          .map(({ input }) => input)
          .join('');
        const saved = (await lab.exec(ns, `${base}-${backend}-save`, [])).stdout;
        const header = `# ${base}-save\n`;
        const want = ruleLines(parseIptablesRuleset(header + render)[family], (words) =>
          savedSpelling(family, words),
        );
        const have = ruleLines(parseIptablesRuleset(header + saved)[family], (words) => words);
        assert.deepEqual([...have.keys()].sort(), [...want.keys()].sort(), `${name}, ${family}: the chains`);
        for (const [chain, lines] of want) {
          const got = have.get(chain)!;
          // The first rule that differs (or is missing): a chain may hold thousands.
          const at = lines.findIndex((line, i) => got[i] !== line);
          assert.equal(got[at], lines[at], `${name}, ${family}, ${chain}, rule ${at + 1}`);
          assert.equal(got.length, lines.length, `${name}, ${family}, ${chain}`);
        }
      }
      // The report itself, from the backend it finds holding kproxy's rules (none for the example:
      // its state comes from files through the CLI, which test/cli/diff-netns.test.ts drives).
      if (state !== undefined) {
        const report = await iptablesDrift(lab.runner(ns), {
          plan: iptablesPlanner.planFull(state),
          servicePorts: servicePortsOf(state),
          localAddresses: [],
        });
        assert.deepEqual([report.pieces, report.foreign, report.unreadable], [[], [], []], name);
      }
    }
  });
}
