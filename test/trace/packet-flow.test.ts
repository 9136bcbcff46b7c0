// Packet-flow tables in the style of kube-proxy's runPacketFlowTests: for one cluster, what
// happens to a packet from a pod, the node or outside to each kind of Service address, traced
// through the rules each mode renders (`kproxy trace --input`). The expectations are
// kube-proxy's documented semantics (pkg/proxy/{iptables,nftables}/proxier_test.go), written
// once and checked against all three modes: this is where the modes are shown to agree.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runTrace } from './cli-run.ts';
import { nodeObject, OTHER_NODE, objectList, serviceObjects, THIS_NODE } from './cluster-objects.ts';

const NODE_IP = '192.168.0.2';
const NODE_IP6 = 'fd00:192::2';
const SECOND_NODE_IP = '192.168.5.2';
const POD = '10.0.1.100'; // a pod on this node
const OTHER_POD = '10.0.2.100'; // a pod on the other node (arrives routed)
const OUTSIDE = '203.0.113.9';

/** The cluster's ServiceCIDR: its addresses that no Service holds are dropped (nftables). */
const SERVICE_CIDR = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'ServiceCIDR',
  metadata: { name: 'kubernetes' },
  spec: { cidrs: ['172.30.0.0/16', 'fd00:172:30::/112'] },
};

const CLUSTER = [
  SERVICE_CIDR,
  nodeObject(THIS_NODE, [NODE_IP, SECOND_NODE_IP, NODE_IP6], ['10.0.1.0/24', 'fd00:10::1:0/112']),
  nodeObject(OTHER_NODE, ['192.168.0.3'], ['10.0.2.0/24']),
  ...serviceObjects({
    name: 'svc1',
    clusterIPs: ['172.30.0.41'],
    nodePort: 3001,
    externalIPs: ['192.168.99.11'],
    endpoints: [{ ip: '10.0.1.1' }, { ip: '10.0.2.1', node: OTHER_NODE }],
  }),
  ...serviceObjects({
    name: 'etp-local',
    clusterIPs: ['172.30.0.42'],
    nodePort: 3002,
    loadBalancerIPs: ['1.2.3.4'],
    externalTrafficPolicy: 'Local',
    endpoints: [{ ip: '10.0.1.2' }, { ip: '10.0.2.2', node: OTHER_NODE }],
  }),
  ...serviceObjects({
    name: 'etp-local-remote',
    clusterIPs: ['172.30.0.43'],
    nodePort: 3003,
    loadBalancerIPs: ['5.6.7.8'],
    externalTrafficPolicy: 'Local',
    endpoints: [{ ip: '10.0.2.3', node: OTHER_NODE }],
  }),
  ...serviceObjects({
    name: 'itp-local-remote',
    clusterIPs: ['172.30.0.44'],
    internalTrafficPolicy: 'Local',
    endpoints: [{ ip: '10.0.2.4', node: OTHER_NODE }],
  }),
  ...serviceObjects({
    name: 'itp-local',
    clusterIPs: ['172.30.0.45'],
    internalTrafficPolicy: 'Local',
    endpoints: [{ ip: '10.0.1.5' }, { ip: '10.0.2.5', node: OTHER_NODE }],
  }),
  ...serviceObjects({ name: 'empty', clusterIPs: ['172.30.0.46'], nodePort: 3006 }),
  ...serviceObjects({
    name: 'ranges',
    clusterIPs: ['172.30.0.47'],
    nodePort: 3007,
    loadBalancerIPs: ['9.9.9.9'],
    loadBalancerSourceRanges: ['203.0.113.0/25'],
    endpoints: [{ ip: '10.0.2.7', node: OTHER_NODE }],
  }),
  // kube-proxy's TestLoadBalancer: ranges that hold this node's IP (192.168.0.2).
  ...serviceObjects({
    name: 'ranges-with-node',
    clusterIPs: ['172.30.0.54'],
    loadBalancerIPs: ['9.9.9.10'],
    loadBalancerSourceRanges: ['192.168.0.0/24', '203.0.113.0/25'],
    endpoints: [{ ip: '10.0.2.14', node: OTHER_NODE }],
  }),
  ...serviceObjects({
    name: 'terminating',
    clusterIPs: ['172.30.0.48'],
    endpoints: [
      { ip: '10.0.1.8', ready: false, serving: true, terminating: true },
      { ip: '10.0.2.8', node: OTHER_NODE, ready: false, serving: false, terminating: true },
    ],
  }),
  ...serviceObjects({
    name: 'ready-and-terminating',
    clusterIPs: ['172.30.0.50'],
    endpoints: [
      { ip: '10.0.1.10' },
      { ip: '10.0.2.10', node: OTHER_NODE, ready: false, serving: true, terminating: true },
    ],
  }),
  ...serviceObjects({
    name: 'affinity',
    clusterIPs: ['172.30.0.49'],
    affinitySeconds: 600,
    endpoints: [{ ip: '10.0.1.9' }, { ip: '10.0.2.9', node: OTHER_NODE }],
  }),
  // trafficDistribution PreferSameNode, as the EndpointSlice controller hints it.
  ...serviceObjects({
    name: 'same-node',
    clusterIPs: ['172.30.0.52'],
    endpoints: [
      { ip: '10.0.1.12', forNodes: [THIS_NODE] },
      { ip: '10.0.2.12', node: OTHER_NODE, forNodes: [OTHER_NODE] },
    ],
  }),
  ...serviceObjects({
    name: 'partial-hints',
    clusterIPs: ['172.30.0.53'],
    endpoints: [
      { ip: '10.0.1.13', forNodes: [THIS_NODE] },
      { ip: '10.0.2.13', node: OTHER_NODE },
    ],
  }),
  ...serviceObjects({
    name: 'dual',
    clusterIPs: ['172.30.0.51', 'fd00:172:30::51'],
    endpoints: [{ ip: '10.0.1.11' }, { ip: 'fd00:10::1:11' }],
  }),
];

interface FlowCase {
  readonly name: string;
  readonly from: string;
  readonly to: string;
  readonly via: 'pod' | 'node' | 'external';
  /** Endpoints ("ip:port", sorted, ", "-joined), or DROP / REJECT. */
  readonly output: string;
  /** Whether the endpoints see the node's address (every endpoint of the output alike). */
  readonly masq?: boolean;
  /** Per-endpoint masquerade where endpoints differ (hairpin): the endpoints that are masqueraded. */
  readonly masqueraded?: readonly string[];
  readonly affinity?: boolean;
  /** Where a mode's documented semantics differ from kube-proxy's iptables mode. */
  readonly ipvs?: Pick<FlowCase, 'output' | 'masq'>;
  readonly nftables?: Pick<FlowCase, 'output' | 'masq'>;
  /** Known divergences from kube-proxy, per mode: run, reported, not failing the suite. */
  readonly todo?: Partial<Record<Mode, string>>;
}

type Mode = 'nftables' | 'iptables' | 'ipvs';

const FLOWS: readonly FlowCase[] = [
  // Topology (pkg/proxy/topology.go): node hints on every ready endpoint, one for this node.
  {
    name: 'PreferSameNode: only the endpoint hinted for this node',
    from: POD,
    to: '172.30.0.52:80',
    via: 'pod',
    output: '10.0.1.12:80',
    masq: false,
  },
  {
    name: 'node hints on some endpoints only are ignored',
    from: POD,
    to: '172.30.0.53:80',
    via: 'pod',
    output: '10.0.1.13:80, 10.0.2.13:80',
    masq: false,
  },
  // ClusterIP
  {
    name: 'ClusterIP from a pod',
    from: POD,
    to: '172.30.0.41:80',
    via: 'pod',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: false,
  },
  {
    name: 'ClusterIP from a pod on another node',
    from: OTHER_POD,
    to: '172.30.0.41:80',
    via: 'external',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: false,
  },
  {
    name: 'ClusterIP from the node',
    from: NODE_IP,
    to: '172.30.0.41:80',
    via: 'node',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  {
    name: 'ClusterIP from outside the cluster',
    from: OUTSIDE,
    to: '172.30.0.41:80',
    via: 'external',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  {
    name: 'unknown port of a ClusterIP',
    from: POD,
    to: '172.30.0.41:81',
    via: 'pod',
    output: '',
    // kube-proxy's IPVS mode rejects ports without a virtual server on its bound addresses (KUBE-IPVS-FILTER).
    ipvs: { output: 'REJECT' },
    // kube-proxy's nftables mode rejects it after DNAT (cluster-ips-check); iptables routes it on.
    nftables: { output: 'REJECT' },
  },
  {
    name: 'unknown protocol of a ClusterIP',
    from: POD,
    to: '172.30.0.41:80/udp',
    via: 'pod',
    output: '',
    ipvs: { output: 'REJECT' },
    nftables: { output: 'REJECT' },
  },
  {
    name: 'unknown port of a ClusterIP from the node',
    from: NODE_IP,
    to: '172.30.0.41:81',
    via: 'node',
    output: '',
    ipvs: { output: 'REJECT' },
    nftables: { output: 'REJECT' },
  },
  {
    name: 'unallocated address of the service CIDR',
    from: POD,
    to: '172.30.0.99:80',
    via: 'pod',
    // Routed on by iptables and IPVS (kube-proxy's OnServiceCIDRsChanged is a no-op there);
    // nftables drops it (cluster-ips-check).
    output: '',
    nftables: { output: 'DROP' },
  },
  {
    name: 'unallocated address of the service CIDR from the node',
    from: NODE_IP,
    to: '172.30.0.99:80',
    via: 'node',
    output: '',
    nftables: { output: 'DROP' },
  },
  {
    name: 'unallocated IPv6 address of the service CIDR',
    from: '[fd00:10::1:100]',
    to: '[fd00:172:30::99]:80',
    via: 'pod',
    output: '',
    nftables: { output: 'DROP' },
  },
  // NodePort (on each node address), external IP
  {
    name: 'NodePort from outside',
    from: OUTSIDE,
    to: `${NODE_IP}:3001`,
    via: 'external',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  {
    name: 'NodePort from a pod',
    from: POD,
    to: `${NODE_IP}:3001`,
    via: 'pod',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  {
    name: 'external IP from outside',
    from: OUTSIDE,
    to: '192.168.99.11:80',
    via: 'external',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  {
    name: 'external IP from a pod',
    from: POD,
    to: '192.168.99.11:80',
    via: 'pod',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masq: true,
  },
  // externalTrafficPolicy: Local
  {
    name: 'eTP Local LB IP from outside: local endpoints, source kept',
    from: OUTSIDE,
    to: '1.2.3.4:80',
    via: 'external',
    output: '10.0.1.2:80',
    masq: false,
  },
  {
    name: 'eTP Local NodePort from outside',
    from: OUTSIDE,
    to: `${NODE_IP}:3002`,
    via: 'external',
    output: '10.0.1.2:80',
    masq: false,
  },
  // IPVS has one virtual server per address: kube-proxy's IPVS mode gives in-cluster clients of
  // an eTP Local LB IP its local endpoints only (no short-circuit to the cluster ones).
  {
    name: 'eTP Local LB IP from a pod: all endpoints',
    from: POD,
    to: '1.2.3.4:80',
    via: 'pod',
    output: '10.0.1.2:80, 10.0.2.2:80',
    masq: false,
    ipvs: { output: '10.0.1.2:80', masq: false },
  },
  {
    name: 'eTP Local LB IP from the node: all endpoints, masqueraded',
    from: NODE_IP,
    to: '1.2.3.4:80',
    via: 'node',
    output: '10.0.1.2:80, 10.0.2.2:80',
    masq: true,
    ipvs: { output: '10.0.1.2:80' },
  },
  {
    name: 'eTP Local ClusterIP is unaffected',
    from: POD,
    to: '172.30.0.42:80',
    via: 'pod',
    output: '10.0.1.2:80, 10.0.2.2:80',
    masq: false,
  },
  {
    name: 'eTP Local without local endpoints, LB IP from outside',
    from: OUTSIDE,
    to: '5.6.7.8:80',
    via: 'external',
    output: 'DROP',
  },
  {
    name: 'eTP Local without local endpoints, NodePort from outside',
    from: OUTSIDE,
    to: `${NODE_IP}:3003`,
    via: 'external',
    output: 'DROP',
  },
  {
    name: 'eTP Local without local endpoints, LB IP from a pod',
    from: POD,
    to: '5.6.7.8:80',
    via: 'pod',
    output: '10.0.2.3:80',
    masq: false,
    ipvs: { output: 'DROP' },
  },
  // internalTrafficPolicy: Local
  {
    name: 'iTP Local with a local endpoint',
    from: POD,
    to: '172.30.0.45:80',
    via: 'pod',
    output: '10.0.1.5:80',
    masq: false,
  },
  { name: 'iTP Local without local endpoints', from: POD, to: '172.30.0.44:80', via: 'pod', output: 'DROP' },
  // No endpoints
  { name: 'no endpoints: ClusterIP', from: POD, to: '172.30.0.46:80', via: 'pod', output: 'REJECT' },
  { name: 'no endpoints: NodePort', from: OUTSIDE, to: `${NODE_IP}:3006`, via: 'external', output: 'REJECT' },
  // loadBalancerSourceRanges
  {
    name: 'LB IP from an allowed source',
    from: '203.0.113.5',
    to: '9.9.9.9:80',
    via: 'external',
    output: '10.0.2.7:80',
    masq: true,
  },
  {
    name: 'LB IP from a source outside the ranges',
    from: '203.0.113.200',
    to: '9.9.9.9:80',
    via: 'external',
    output: 'DROP',
  },
  // The node's own traffic is bound by the ranges too (kube-proxy's TestLoadBalancer "node to LB1
  // (allowed by LoadBalancerSourceRanges)"; filter OUTPUT jumps to KUBE-PROXY-FIREWALL). A node
  // that holds the LB IP locally (IPVS's dummy link) reaches it from that IP, allowed with the node.
  {
    name: 'LB IP from the node, its IP outside the ranges',
    from: NODE_IP,
    to: '9.9.9.9:80',
    via: 'node',
    output: 'DROP',
  },
  {
    name: 'LB IP from the node, its IP inside the ranges',
    from: NODE_IP,
    to: '9.9.9.10:80',
    via: 'node',
    output: '10.0.2.14:80',
    masq: true,
  },
  {
    name: 'LB IP from itself on the node, the node outside the ranges',
    from: '9.9.9.9',
    to: '9.9.9.9:80',
    via: 'node',
    output: 'DROP',
  },
  {
    name: 'LB IP from itself on the node, the node inside the ranges (implicitly allowed)',
    from: '9.9.9.10',
    to: '9.9.9.10:80',
    via: 'node',
    output: '10.0.2.14:80',
    masq: true,
  },
  {
    name: 'NodePort of a Service with source ranges is not filtered',
    from: '203.0.113.200',
    to: `${NODE_IP}:3007`,
    via: 'external',
    output: '10.0.2.7:80',
    masq: true,
  },
  // Terminating endpoints
  {
    name: 'no ready endpoint: serving terminating ones',
    from: POD,
    to: '172.30.0.48:80',
    via: 'pod',
    output: '10.0.1.8:80',
    masq: false,
  },
  {
    name: 'a ready endpoint: terminating ones unused',
    from: POD,
    to: '172.30.0.50:80',
    via: 'pod',
    output: '10.0.1.10:80',
    masq: false,
  },
  // Affinity
  {
    name: 'ClientIP affinity',
    from: POD,
    to: '172.30.0.49:80',
    via: 'pod',
    output: '10.0.1.9:80, 10.0.2.9:80',
    masq: false,
    affinity: true,
  },
  // Hairpin: a pod reaching itself through its Service is masqueraded, the others not.
  {
    name: 'hairpin',
    from: '10.0.1.1',
    to: '172.30.0.41:80',
    via: 'pod',
    output: '10.0.1.1:80, 10.0.2.1:80',
    masqueraded: ['10.0.1.1:80'],
  },
  // Dual-stack
  {
    name: 'dual-stack: IPv4 ClusterIP',
    from: POD,
    to: '172.30.0.51:80',
    via: 'pod',
    output: '10.0.1.11:80',
    masq: false,
  },
  {
    name: 'dual-stack: IPv6 ClusterIP',
    from: '[fd00:10::1:100]',
    to: '[fd00:172:30::51]:80',
    via: 'pod',
    output: '[fd00:10::1:11]:80',
    masq: false,
  },
];

interface JsonOutcome {
  readonly kind: string;
  readonly endpoint?: string;
  readonly probability: number;
  readonly masquerade?: unknown;
  readonly affinity?: string;
}

/** The case's answer as the tracer gives it, in the case's own terms. */
function observed(outcomes: readonly JsonOutcome[], expected: FlowCase) {
  const kinds = new Set(outcomes.map((o) => o.kind));
  if (kinds.has('drop') || kinds.has('reject')) return { output: [...kinds].join(',').toUpperCase() };
  const dnat = outcomes.filter((o) => o.kind === 'dnat');
  const output = dnat
    .map((o) => o.endpoint!)
    .sort()
    .join(', ');
  return {
    output,
    ...(expected.masq !== undefined &&
      dnat.length > 0 && {
        masq: dnat.every((o) => o.masquerade !== undefined)
          ? true
          : dnat.some((o) => o.masquerade !== undefined)
            ? 'mixed'
            : false,
      }),
    ...(expected.masqueraded && {
      masqueraded: dnat
        .filter((o) => o.masquerade !== undefined)
        .map((o) => o.endpoint!)
        .sort(),
    }),
    ...(expected.affinity && { affinity: dnat.every((o) => o.affinity !== undefined) }),
  };
}

function wanted(expected: FlowCase) {
  return {
    output: expected.output,
    ...(expected.masq !== undefined && expected.output.includes(':') && { masq: expected.masq }),
    ...(expected.masqueraded && { masqueraded: expected.masqueraded }),
    ...(expected.affinity && { affinity: true }),
  };
}

/** Node-wide settings change the answer for the same packet: masquerade-all, local traffic detection. */
const VARIANTS: readonly { readonly flags: readonly string[]; readonly flow: FlowCase }[] = [
  {
    // kube-proxy's iptables.localhostNodePorts (default true, `render --mode iptables`); its
    // nftables and IPVS modes do not serve node ports on 127.0.0.1.
    flags: ['--nodeport-addresses', '127.0.0.0/8,192.168.0.0/16'],
    flow: {
      name: 'localhost NodePort from the node',
      from: '127.0.0.1',
      to: '127.0.0.1:3001',
      via: 'node',
      output: '10.0.1.1:80, 10.0.2.1:80',
      masq: true,
      nftables: { output: '' },
      ipvs: { output: '' },
    },
  },
  {
    flags: ['--masquerade-all'],
    flow: {
      name: 'masquerade-all: ClusterIP from a pod',
      from: POD,
      to: '172.30.0.41:80',
      via: 'pod',
      output: '10.0.1.1:80, 10.0.2.1:80',
      masq: true,
    },
  },
  {
    flags: ['--detect-local-mode', 'NodeCIDR'],
    flow: {
      name: 'NodeCIDR: a pod of this node is local',
      from: POD,
      to: '172.30.0.41:80',
      via: 'pod',
      output: '10.0.1.1:80, 10.0.2.1:80',
      masq: false,
    },
  },
  {
    flags: ['--detect-local-mode', 'NodeCIDR'],
    flow: {
      name: "NodeCIDR: another node's pod is not",
      from: OTHER_POD,
      to: '172.30.0.41:80',
      via: 'external',
      output: '10.0.1.1:80, 10.0.2.1:80',
      masq: true,
    },
  },
  {
    flags: ['--detect-local-mode', 'ClusterCIDR'],
    flow: {
      name: "ClusterCIDR: another node's pod is local",
      from: OTHER_POD,
      to: '172.30.0.41:80',
      via: 'external',
      output: '10.0.1.1:80, 10.0.2.1:80',
      masq: false,
    },
  },
];

describe('packet flows through every mode', () => {
  let dir: string;
  let input: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kproxy-trace-'));
    input = join(dir, 'cluster.json');
    await writeFile(input, objectList(CLUSTER));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const common = () => [
    '--input',
    input,
    '--node',
    THIS_NODE,
    '--cluster-cidr',
    '10.0.0.0/16,fd00:10::/48',
    '--nodeport-addresses',
    '192.168.0.0/16',
    '--json',
  ];
  const check = async (mode: Mode, flow: FlowCase, flags: readonly string[] = []) => {
    const args = [...common(), ...flags, '--from', flow.from, '--to', flow.to, '--via', flow.via];
    const result = await runTrace(['--mode', mode, ...args]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout) as { outcomes: JsonOutcome[]; notEvaluated: string[] };
    assert.deepEqual(observed(report.outcomes, flow), wanted(flow), result.stdout);
    const total = report.outcomes.reduce((sum, o) => sum + o.probability, 0);
    assert.ok(Math.abs(total - 1) < 1e-6, `probabilities sum to ${total}`);
    assert.deepEqual(report.notEvaluated, []);
  };

  for (const mode of ['nftables', 'iptables', 'ipvs'] as const) {
    for (const each of FLOWS) {
      const override = mode === 'iptables' ? undefined : each[mode];
      const flow: FlowCase = override ? { ...each, masq: undefined, ...override } : each;
      test(`${mode}: ${flow.name}`, { todo: flow.todo?.[mode] ?? false }, () => check(mode, flow));
    }
    for (const { flags, flow: each } of VARIANTS) {
      const override = mode === 'iptables' ? undefined : each[mode];
      const flow: FlowCase = override ? { ...each, masq: undefined, ...override } : each;
      test(`${mode}: ${flow.name}`, () => check(mode, flow, flags));
    }
  }
  test('ipvs: ClientIP affinity is the companion table remembering the client for the Service timeout, not IPVS persistence (kubernetes#89358)', async () => {
    const flow = FLOWS.find((each) => each.affinity)!;
    const args = ['--mode', 'ipvs', ...common(), '--from', flow.from, '--to', flow.to, '--via', flow.via];
    const report = JSON.parse((await runTrace(args)).stdout) as { outcomes: JsonOutcome[] };
    assert.ok(report.outcomes.length > 0);
    for (const outcome of report.outcomes)
      assert.match(outcome.affinity ?? '', /^ClientIP affinity: @affinity-clients remembers \S+ for 600s/);
  });
});
