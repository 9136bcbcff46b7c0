// Real objects as clusters served them (test/sources/fixtures/real, SOURCES.md says where each
// comes from), rendered by `kproxy render` in each mode: every Service port the cluster served is
// programmed on its cluster IPs with the endpoints the cluster listed, the Nodes are read, nothing
// is skipped that kproxy uses, and what it does not use is named once. UPDATE_GOLDEN=1 rewrites the
// golden (look at the diff by eye before committing).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { captureIO } from '../cli/capture-io.ts';

const FIXTURES = join(import.meta.dirname, 'fixtures/real');
const GOLDEN = join(import.meta.dirname, '../golden/nftables/real-cilium-dualstack.nft');
const MODES = ['nftables', 'iptables', 'ipvs'] as const;
type Mode = (typeof MODES)[number];

interface ServicePortFacts {
  /** "namespace/name:port/PROTOCOL", as the rules' comments name it. */
  readonly key: string;
  readonly clusterIPs: readonly string[];
  /** Per cluster IP, in the same order: the endpoints as address and port. */
  readonly endpoints: readonly (readonly (readonly [string, number])[])[];
}

interface Dump {
  readonly files: readonly string[];
  readonly args: readonly string[];
  readonly servicePorts: readonly ServicePortFacts[];
  /** The node's addresses, from its Node object (not from --node-ip). */
  readonly nodeIPs: readonly string[];
  /** Each note and warning expected, once: a pattern per line, in order. */
  readonly notes: readonly RegExp[];
  readonly warnings: readonly RegExp[];
  /** Addresses the cluster listed that must not be programmed (their objects are not used). */
  readonly absent?: readonly string[];
}

const noEndpoints = (count: number) => Array.from({ length: count }, () => []);

const DUMPS: Readonly<Record<string, Dump>> = {
  // kubectl get services,endpoints,endpointslices -o yaml (kind: List), a dual-stack kind cluster.
  'kind: List, dual-stack NodePort, legacy Endpoints beside EndpointSlices': {
    files: ['cilium-dualstack-v1.27-state1.yaml'],
    args: ['--node', 'dual-stack-worker', '--node-ip', '172.18.0.3', '--node-ip', 'fc00:f853:ccd:e793::3'],
    servicePorts: ['80/TCP', '69/UDP'].map((port) => {
      const number = Number(port.split('/')[0]);
      return {
        key: `default/echo-dualstack:${port}`,
        clusterIPs: ['10.96.125.19', 'fd00:10:96::14f9'],
        endpoints: [
          [
            ['10.244.2.62', number],
            ['10.244.1.69', number],
          ],
          [
            ['fd00:10:244:2::72d4', number],
            ['fd00:10:244:1::3c6f', number],
          ],
        ],
      };
    }),
    nodeIPs: [],
    notes: [
      /: 2 Endpoints objects \(Endpoints default\/echo-dualstack, \.\.\.\) not used: kproxy reads endpoints from EndpointSlices/,
    ],
    warnings: [],
  },
  // The default Service of the same file, on its own: the API server's own slice.
  'kind: List, the kubernetes Service and the API server’s EndpointSlice': {
    files: ['cilium-dualstack-v1.27-state1.yaml'],
    args: ['--node', 'dual-stack-worker', '--node-ip', '172.18.0.3'],
    servicePorts: [
      { key: 'default/kubernetes:443/TCP', clusterIPs: ['10.96.0.1'], endpoints: [[['172.18.0.7', 6443]]] },
    ],
    nodeIPs: [],
    notes: [/Endpoints objects .* not used/],
    warnings: [],
  },
  // kubectl get -n test services,endpointslices -o yaml while the only pod terminates: it still
  // serves, so it keeps the traffic (kube-proxy's fallback to serving terminating endpoints).
  'kind: List, a terminating endpoint that still serves': {
    files: ['cilium-graceful-termination-state2.yaml'],
    args: ['--node', 'graceful-term-control-plane', '--node-ip', '172.18.0.2'],
    servicePorts: [
      {
        key: 'test/graceful-term-svc:8081/TCP',
        clusterIPs: ['10.96.23.96'],
        endpoints: [[['10.244.0.180', 8081]]],
      },
    ],
    nodeIPs: [],
    notes: [],
    warnings: [],
  },
  // GET /api/v1/services and /api/v1/nodes of one minikube cluster: typed lists, items without kind.
  'typed ServiceList and NodeList (kubectl get --raw), JSON': {
    files: ['victoriametrics-servicelist.json', 'victoriametrics-nodelist.json'],
    args: ['--node', 'm01'],
    servicePorts: ['53/UDP', '53/TCP', '9153/TCP'].map((port) => ({
      key: `kube-system/kube-dns:${port}`,
      clusterIPs: ['10.96.0.10'],
      endpoints: noEndpoints(1),
    })),
    nodeIPs: ['172.17.0.2'],
    notes: [
      /servicelist\.json: Service kube-system\/kube-dns render without endpoints: the input has no EndpointSlice/,
    ],
    warnings: [],
  },
  // GET /apis/discovery.k8s.io/v1beta1/endpointslices of a 2020 kind cluster: a version kproxy does not read.
  'typed EndpointSliceList of discovery.k8s.io/v1beta1': {
    files: ['victoriametrics-endpointslicelist-v1beta1.json'],
    args: ['--node', 'kind-control-plane', '--node-ip', '192.0.2.1'],
    servicePorts: [],
    nodeIPs: [],
    notes: [],
    warnings: [
      /: 2 EndpointSlice objects \(EndpointSlice default\/kubernetes, \.\.\.\) skipped: EndpointSlice "discovery\.k8s\.io\/v1beta1" is not supported \(want discovery\.k8s\.io\/v1\)/,
    ],
    absent: ['172.18.0.2', '10.244.0.3', '10.244.0.4'],
  },
  // kubectl get service -o json of one Service on GKE, and of one Node of minikube.
  'single objects, JSON': {
    files: ['k9s-service.json'],
    args: ['--node', 'gke-node', '--node-ip', '10.128.0.2'],
    servicePorts: [{ key: 'default/dictionary1:4001/TCP', clusterIPs: ['10.47.248.116'], endpoints: [[]] }],
    nodeIPs: [],
    notes: [/Service default\/dictionary1 render without endpoints/],
    warnings: [],
  },
  'a single Node, JSON': {
    files: ['k9s-node.json'],
    args: ['--node', 'minikube'],
    servicePorts: [],
    nodeIPs: ['192.168.64.107'],
    notes: [],
    warnings: [],
  },
  // kubectl cluster-info dump's stdout on a kubeadm 1.28 cluster: typed lists of two namespaces,
  // Pods, Events, DaemonSets... and each container's logs between them.
  'kubectl cluster-info dump (stdout)': {
    files: ['kubeadm-1.28-cluster-info-dump.txt'],
    args: ['--node', 'k8s-controller-01'],
    servicePorts: [
      ...['53/UDP', '53/TCP', '9153/TCP'].map((port) => ({
        key: `kube-system/kube-dns:${port}`,
        clusterIPs: ['10.96.0.10'],
        endpoints: noEndpoints(1),
      })),
      { key: 'default/kubernetes:443/TCP', clusterIPs: ['10.96.0.1'], endpoints: noEndpoints(1) },
    ],
    nodeIPs: ['192.168.1.105'],
    notes: [
      /: 2 Event objects \(Event kube-system\/coredns-5dd5756b68-2zrhr\.1801bdc416b3447a, \.\.\.\) not used/,
      /: DaemonSet kube-system\/kube-proxy not used/,
      /: Deployment kube-system\/coredns not used/,
      /: ReplicaSet kube-system\/coredns-5dd5756b68 not used/,
      /: 7 Pod objects \(Pod kube-system\/coredns-5dd5756b68-2zrhr, \.\.\.\) not used: kproxy reads only Services, EndpointSlices, Nodes and ServiceCIDRs/,
      /: 2 Services \(Service kube-system\/kube-dns, \.\.\.\) render without endpoints: the input has no EndpointSlice; feed `kubectl get endpointslices -A -o yaml` too/,
    ],
    warnings: [],
  },
};

async function render(mode: Mode, dump: Dump, extra: readonly string[] = []) {
  const inputs = dump.files.flatMap((file) => ['--input', join(FIXTURES, file)]);
  const captured = captureIO();
  const code = await main(['render', '--mode', mode, ...inputs, ...dump.args, ...extra], captured.io);
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}

function hostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** An element of an nft set or map: on a line of its own in a long list, or alone in braces. */
function nftElement(pattern: string): RegExp {
  return new RegExp(`(?:^\\t|\\{ )${pattern}(?:,$| \\})`, 'm');
}

/** The rule or element that sends a service port's traffic to one endpoint, or rejects it without any. */
function dispatchPatterns(
  mode: Mode,
  facts: ServicePortFacts,
  ip: string,
  endpoints: readonly (readonly [string, number])[],
): RegExp[] {
  const [portText, protocol] = facts.key.split(':').at(-1)!.split('/') as [string, string];
  const port = Number(portText);
  const proto = protocol.toLowerCase();
  const flag = { tcp: 't', udp: 'u', sctp: 's' }[proto];
  const vip = literal(ip);
  const key = literal(facts.key);
  if (endpoints.length === 0) {
    return [
      mode === 'nftables'
        ? nftElement(`${vip} \\. ${proto} \\. ${port} comment "${key}"`)
        : mode === 'iptables'
          ? new RegExp(`--comment "${key} has no endpoints" .* -d ${vip} --dport ${port} -j REJECT$`, 'm')
          : new RegExp(`^-A -${flag} ${literal(hostPort(ip, port))} -s rr$`, 'm'),
    ];
  }
  return endpoints.map(([address, target]) =>
    mode === 'nftables'
      ? nftElement(`${vip} \\. ${port} \\. \\d+ : ${literal(address)} \\. ${target}`)
      : mode === 'iptables'
        ? new RegExp(
            `--comment "?${key}"? .*-j DNAT --to-destination ${literal(hostPort(address, target))}$`,
            'm',
          )
        : new RegExp(
            `^-a -${flag} ${literal(hostPort(ip, port))} -r ${literal(hostPort(address, target))} `,
            'm',
          ),
  );
}

for (const [shape, dump] of Object.entries(DUMPS)) {
  for (const mode of MODES) {
    test(`render --mode ${mode}, ${shape}: what the cluster served is programmed, the rest named once`, async () => {
      const result = await render(mode, dump);
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stderr.split('\n').filter(Boolean);
      const notes = lines.filter((line) => line.startsWith('note: '));
      const warnings = lines.filter((line) => line.startsWith('warning: '));
      assert.equal(notes.length + warnings.length, lines.length, result.stderr);
      assert.equal(notes.length, dump.notes.length, result.stderr);
      for (const [i, pattern] of dump.notes.entries()) assert.match(notes[i]!, pattern);
      assert.equal(warnings.length, dump.warnings.length, result.stderr);
      for (const [i, pattern] of dump.warnings.entries()) assert.match(warnings[i]!, pattern);
      for (const facts of dump.servicePorts) {
        for (const [i, ip] of facts.clusterIPs.entries()) {
          for (const pattern of dispatchPatterns(mode, facts, ip, facts.endpoints[i]!)) {
            assert.match(result.stdout, pattern, `${facts.key} on ${ip}`);
          }
        }
      }
      // iptables matches node addresses by type (addrtype LOCAL), so only the others list them.
      if (mode !== 'iptables') {
        for (const ip of dump.nodeIPs)
          assert.match(result.stdout, new RegExp(`nodeport-ips \\{ ${literal(ip)} \\}`));
      }
      for (const ip of dump.absent ?? [])
        assert.ok(!result.stdout.includes(ip), `${ip} must not be programmed`);
    });
  }
  // Notes inform: a whole dump renders with --strict; what loses rules (a warning) stops it.
  test(`render --strict, ${shape}: ${dump.warnings.length === 0 ? 'renders despite its notes' : 'fails on its warnings'}`, async () => {
    const result = await render('nftables', dump, ['--strict']);
    assert.equal(result.code, dump.warnings.length === 0 ? 0 : 1, result.stderr);
    assert.equal(result.stdout === '', dump.warnings.length > 0);
  });
}

test('golden: the dual-stack kind cluster’s Services and EndpointSlices, nftables', async () => {
  const result = await render(
    'nftables',
    DUMPS['kind: List, dual-stack NodePort, legacy Endpoints beside EndpointSlices']!,
  );
  assert.equal(result.code, 0, result.stderr);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(GOLDEN, result.stdout);
  assert.equal(result.stdout, readFileSync(GOLDEN, 'utf8'), `${GOLDEN} differs (UPDATE_GOLDEN=1 to rewrite)`);
});
