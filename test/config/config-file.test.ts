import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfigFile } from '../../src/config/config-file.ts';

const header = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

function errorOf(body: string): string | undefined {
  const result = parseConfigFile(header + body, 'config.yaml');
  return result.ok ? undefined : result.error;
}

test('fields become settings keyed by their dotted path, durations in ms, lists split', () => {
  const result = parseConfigFile(
    `${header}mode: nftables\nclusterCIDR: 10.244.0.0/16,fd00:10:244::/56\nnftables:\n  masqueradeBit: 5\n  syncPeriod: 1m0s\nnodePortAddresses: [primary]\n`,
    'config.yaml',
  );
  assert.ok(result.ok);
  assert.deepEqual(Object.fromEntries(result.settings), {
    mode: 'nftables',
    clusterCIDR: ['10.244.0.0/16', 'fd00:10:244::/56'],
    'nftables.masqueradeBit': 5,
    'nftables.syncPeriod': 60_000,
    nodePortAddresses: ['primary'],
  });
});

test('an out-of-range value names the field and the range', () => {
  assert.equal(
    errorOf('nftables:\n  masqueradeBit: 40\n'),
    'config.yaml: nftables.masqueradeBit: 40 is out of range (0-31)',
  );
});

test('an unknown top-level field is rejected by name', () => {
  assert.equal(errorOf('iptable:\n  masqueradeBit: 14\n'), 'config.yaml: unknown field "iptable"');
});

test('an unknown field inside a section is rejected with its path', () => {
  assert.equal(
    errorOf('iptables:\n  masqueradeBits: 14\n'),
    'config.yaml: unknown field "iptables.masqueradeBits"',
  );
  // localhostNodePorts is iptables-only in kube-proxy's API too (its nftables section lacks it).
  assert.equal(errorOf('iptables:\n  localhostNodePorts: false\n'), undefined);
  assert.equal(
    errorOf('nftables:\n  localhostNodePorts: false\n'),
    'config.yaml: unknown field "nftables.localhostNodePorts"',
  );
});

test('invalid values of each kind are rejected with the field named', () => {
  const cases: [string, string][] = [
    ['mode: userspace\n', 'mode: "userspace" is not one of iptables, nftables, ipvs'],
    ['syncPeriod: 30\n', 'syncPeriod: 30 is not a duration (like 30s, 1m0s, 500ms)'],
    [
      'iptables:\n  minSyncPeriod: soon\n',
      'iptables.minSyncPeriod: "soon" is not a duration (like 30s, 1m0s, 500ms)',
    ],
    ['masqueradeAll: yes\n', 'masqueradeAll: "yes" is not true or false'],
    ['clusterCIDR: 10.244.0.0/33\n', 'clusterCIDR: "10.244.0.0/33" is not a CIDR'],
    ['nodeIPs: [10.0.0.300]\n', 'nodeIPs: "10.0.0.300" is not an IP address'],
    [
      'nodePortAddresses: [everywhere]\n',
      'nodePortAddresses: "everywhere" is not a CIDR, "primary", "localhost" or "all"',
    ],
    [
      'detectLocalMode: Magic\n',
      'detectLocalMode: "Magic" is not one of ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix',
    ],
    [
      'healthzBindAddress: "0.0.0.0:99999"\n',
      'healthzBindAddress: "0.0.0.0:99999" has a port out of range (0-65535)',
    ],
    [
      'metricsBindAddress: localhost:10249\n',
      'metricsBindAddress: "localhost:10249" is not an IP:port address',
    ],
    [
      'ipvs:\n  scheduler: random\n',
      'ipvs.scheduler: "random" is not one of rr, wrr, lc, wlc, lblc, lblcr, sh, dh, sed, nq, mh',
    ],
    ['conntrack:\n  maxPerCore: -1\n', 'conntrack.maxPerCore: -1 is out of range (0-2147483647)'],
    ['conntrack:\n  min: 1.5\n', 'conntrack.min: 1.5 is not an integer'],
    ['clientConnection:\n  qps: -2\n', 'clientConnection.qps: -2 is less than 0'],
    ['iptables: 14\n', 'iptables: 14 is not a mapping'],
    ['hostnameOverride: 42\n', 'hostnameOverride: 42 is not a string'],
  ];
  for (const [body, message] of cases) assert.equal(errorOf(body), `config.yaml: ${message}`, body);
});

test('null, "" and zero sync periods mean "use the default", as in kube-proxy', () => {
  const result = parseConfigFile(
    `${header}mode: ""\nhostnameOverride: ""\niptables:\n  masqueradeBit: null\n  syncPeriod: 0s\nconntrack:\n  maxPerCore: 0\n  tcpCloseWaitTimeout: null\n`,
    'config.yaml',
  );
  assert.ok(result.ok);
  // maxPerCore 0 is a real value ("leave the limit alone"), not "unset".
  assert.deepEqual(Object.fromEntries(result.settings), { 'conntrack.maxPerCore': 0 });
});

test('a kubeadm-generated kube-proxy config (with fields kproxy does not use) loads', () => {
  const kubeadm = `${header}bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
featureGates: {}
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
`;
  const result = parseConfigFile(kubeadm, 'kube-proxy.yaml');
  assert.ok(result.ok, !result.ok ? result.error : '');
  assert.equal(result.settings.get('clusterCIDR')?.toString(), '10.244.0.0/16');
  assert.equal(result.settings.get('clientConnection.kubeconfig'), '/var/lib/kube-proxy/kubeconfig.conf');
});

test('the document must be a KubeProxyConfiguration of the v1alpha1 API', () => {
  const wrongKind = parseConfigFile(
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n',
    'c.yaml',
  );
  assert.deepEqual(wrongKind, {
    ok: false,
    error: 'c.yaml: kind: "KubeletConfiguration" is not KubeProxyConfiguration',
  });
  const wrongVersion = parseConfigFile('apiVersion: v1\nkind: KubeProxyConfiguration\n', 'c.yaml');
  assert.deepEqual(wrongVersion, {
    ok: false,
    error: 'c.yaml: apiVersion: "v1" is not kubeproxy.config.k8s.io/v1alpha1',
  });
});

test('a config file that does not parse reports file:line', () => {
  const result = parseConfigFile(`${header}iptables:\n  masqueradeBit: [14\n`, 'config.yaml');
  assert.match(result.ok ? '' : result.error, /^config\.yaml:\d+: /);
});
