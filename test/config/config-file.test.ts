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

function warningsOf(body: string): readonly string[] {
  const result = parseConfigFile(header + body, 'config.yaml');
  assert.ok(result.ok, !result.ok ? result.error : '');
  return result.warnings;
}

const LENIENT = 'config.yaml: using lenient decoding as strict decoding failed: strict decoding error:';

test("unknown fields fail the strict decoding only: the lenient one drops them with kube-proxy's warning", () => {
  // kind's config has metadata; old kubeadm's resourceContainer and udpIdleTimeout were removed from the API.
  const result = parseConfigFile(
    `${header}metadata:\n  name: config\nresourceContainer: /kube-proxy\niptables:\n  masqueradeBits: 14\n  masqueradeBit: 5\nconntrack:\n  max: 0\n`,
    'config.yaml',
  );
  assert.ok(result.ok, !result.ok ? result.error : '');
  assert.deepEqual(result.warnings, [
    `${LENIENT} unknown field "metadata", unknown field "resourceContainer", unknown field "iptables.masqueradeBits", unknown field "conntrack.max"`,
  ]);
  // The known fields beside them still count.
  assert.deepEqual(Object.fromEntries(result.settings), { 'iptables.masqueradeBit': 5 });
  // localhostNodePorts is iptables-only in kube-proxy's API too (its nftables section lacks it).
  assert.deepEqual(warningsOf('iptables:\n  localhostNodePorts: false\n'), []);
  assert.deepEqual(warningsOf('nftables:\n  localhostNodePorts: false\n'), [
    `${LENIENT} unknown field "nftables.localhostNodePorts"`,
  ]);
});

test('a repeated key fails the strict decoding only: the lenient one keeps the last value, as yaml.v2', () => {
  const result = parseConfigFile(
    `${header}mode: ipvs\nmetadata: {name: x}\niptables:\n  syncPeriod: 10s\n  "syncPeriod": 20s\nmode: iptables\n`,
    'config.yaml',
  );
  assert.ok(result.ok, !result.ok ? result.error : '');
  assert.deepEqual(Object.fromEntries(result.settings), { mode: 'iptables', 'iptables.syncPeriod': 20_000 });
  // kube-proxy's strict decoder stops at the YAML, so the unknown metadata is not named.
  assert.deepEqual(result.warnings, [
    `${LENIENT} yaml: unmarshal errors: line 7: key "syncPeriod" already set in map, line 8: key "mode" already set in map`,
  ]);
  // Any other YAML fault is still an error.
  assert.match(errorOf('mode: ipvs\nmode: [iptables\n') ?? '', /^config\.yaml:\d+: /);
});

test('every field of v1alpha1 KubeProxyConfiguration loads, strictly', () => {
  // Every field kubernetes/kubernetes master at 052d2d84 (newer than 1.37) declares in
  // staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go, with component-base's
  // ClientConnectionConfiguration and LoggingConfiguration, at zero values.
  const every = `featureGates: {}
clientConnection: {kubeconfig: "", acceptContentTypes: "", contentType: "", qps: 0, burst: 0}
logging:
  format: text
  flushFrequency: 0
  verbosity: 0
  vmodule: []
  options: {text: {infoBufferSize: "0", splitStream: false}, json: {infoBufferSize: "0", splitStream: false}}
hostnameOverride: ""
bindAddress: ""
healthzBindAddress: ""
metricsBindAddress: ""
bindAddressHardFail: true
enableProfiling: false
showHiddenMetricsForVersion: ""
mode: ""
iptables: {masqueradeBit: null, masqueradeAll: false, localhostNodePorts: null, snatNodeInternalIP: null, syncPeriod: 0s, minSyncPeriod: 0s}
ipvs: {syncPeriod: 0s, minSyncPeriod: 0s, scheduler: "", excludeCIDRs: null, strictARP: false, tcpTimeout: 0s, tcpFinTimeout: 0s, udpTimeout: 0s}
nftables: {masqueradeBit: null, masqueradeAll: false, syncPeriod: 0s, minSyncPeriod: 0s}
winkernel: {networkName: "", sourceVip: "", enableDSR: false, rootHnsEndpointName: "", forwardHealthCheckVip: false}
detectLocalMode: ""
detectLocal: {bridgeInterface: "", interfaceNamePrefix: ""}
clusterCIDR: ""
nodePortAddresses: null
oomScoreAdj: null
conntrack: {maxPerCore: null, min: null, tcpEstablishedTimeout: null, tcpCloseWaitTimeout: null, tcpBeLiberal: false, udpTimeout: 0s, udpStreamTimeout: 0s}
configSyncPeriod: 0s
portRange: ""
windowsRunAsService: false
`;
  const result = parseConfigFile(header + every, 'config.yaml');
  assert.ok(result.ok, !result.ok ? result.error : '');
  assert.deepEqual(result.warnings, []);
  // Zero values that are real values (false, 0s) stay; nulls and "" leave the default.
  assert.deepEqual(Object.fromEntries(result.settings), {
    'conntrack.tcpBeLiberal': false,
    'conntrack.udpStreamTimeout': 0,
    'conntrack.udpTimeout': 0,
    'iptables.masqueradeAll': false,
    'ipvs.minSyncPeriod': 0,
    'ipvs.strictARP': false,
    'ipvs.tcpFinTimeout': 0,
    'ipvs.tcpTimeout': 0,
    'ipvs.udpTimeout': 0,
    'logging.format': 'text',
    'logging.verbosity': 0,
    'nftables.masqueradeAll': false,
  });
});

test('a field that does nothing here, set, gets one warning saying why; the fields part 3 reads are kept', () => {
  const result = parseConfigFile(
    `${header}windowsRunAsService: true
winkernel: {networkName: l2bridge, enableDSR: true}
featureGates: {KubeProxyNFTablesLocalhostNodePorts: true}
iptables: {snatNodeInternalIP: true}
logging: {format: json, vmodule: [{filePattern: proxier.go, verbosity: 4}], flushFrequency: 5s}
clientConnection: {contentType: application/vnd.kubernetes.protobuf, acceptContentTypes: application/json}
bindAddressHardFail: false
configSyncPeriod: 15m0s
oomScoreAdj: -999
`,
    'config.yaml',
  );
  assert.ok(result.ok, !result.ok ? result.error : '');
  assert.deepEqual(result.warnings, [
    'config.yaml: windowsRunAsService: true has no effect: Windows-only (kube-proxy on Windows)',
    `config.yaml: winkernel.networkName: "l2bridge" has no effect: Windows-only (kube-proxy on Windows): the winkernel proxy's HNS settings`,
    `config.yaml: winkernel.enableDSR: true has no effect: Windows-only (kube-proxy on Windows): the winkernel proxy's HNS settings`,
    'config.yaml: featureGates: {"KubeProxyNFTablesLocalhostNodePorts":true} has no effect: kproxy has no feature gates: what it implements is always on',
    `config.yaml: iptables.snatNodeInternalIP: true has no effect: not implemented: kproxy masquerades to the egress interface's address`,
    'config.yaml: logging.vmodule: [{"filePattern":"proxier.go","verbosity":4}] has no effect: kproxy has no per-file verbosity: logging.verbosity applies everywhere',
    'config.yaml: logging.flushFrequency: "5s" has no effect: kproxy writes each log line as it happens',
    'config.yaml: clientConnection.contentType: "application/vnd.kubernetes.protobuf" has no effect: kproxy always sends JSON',
    'config.yaml: bindAddressHardFail: false has no effect: kproxy always exits when it cannot listen on healthzBindAddress or metricsBindAddress',
    `config.yaml: configSyncPeriod: "15m0s" has no effect: kproxy's informers never relist on a timer; a watch that ends is resumed`,
  ]);
  assert.deepEqual(Object.fromEntries(result.settings), { 'logging.format': 'json', oomScoreAdj: -999 });
});

test("kube-proxy's range rules (oomScoreAdj, negative durations, logging.format) and types, of inert fields too", () => {
  assert.equal(
    errorOf('oomScoreAdj: -1001\n'),
    'config.yaml: oomScoreAdj: -1001 is out of range (-1000-1000)',
  );
  assert.equal(
    errorOf('conntrack:\n  tcpCloseWaitTimeout: -1s\n'),
    'config.yaml: conntrack.tcpCloseWaitTimeout: "-1s": must be greater than or equal to 0',
  );
  assert.equal(
    errorOf('iptables:\n  syncPeriod: -30s\n'),
    'config.yaml: iptables.syncPeriod: "-30s": must be greater than 0',
  );
  assert.equal(
    errorOf('logging:\n  format: yaml\n'),
    'config.yaml: logging.format: "yaml" is not one of text, json',
  );
  // Fields that do nothing here are still decoded into kube-proxy's types: a wrong type is refused.
  assert.equal(
    errorOf('enableProfiling: "yes"\n'),
    'config.yaml: enableProfiling: "yes" is not true or false',
  );
  assert.equal(
    errorOf('winkernel:\n  networkName: 5\n'),
    'config.yaml: winkernel.networkName: 5 is not a string',
  );
  assert.equal(
    errorOf('configSyncPeriod: -1m\n'),
    'config.yaml: configSyncPeriod: "-1m": must be greater than 0',
  );
});

test('a JSON config with a syntax error reads as a JSON error at file:line:column', () => {
  const result = parseConfigFile(
    '{\n  "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",\n  "kind": "KubeProxyConfiguration",\n  "mode": "iptables",\n}\n',
    'config.json',
  );
  assert.match(result.ok ? '' : result.error, /^config\.json:5:1: not valid JSON: /);
  const good = parseConfigFile(
    '{"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "ipvs"}',
    'config.json',
  );
  assert.ok(good.ok);
  assert.equal(good.settings.get('mode'), 'ipvs');
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
  assert.deepEqual(result.warnings, [
    'kube-proxy.yaml: bindAddressHardFail: false has no effect: kproxy always exits when it cannot listen on healthzBindAddress or metricsBindAddress',
  ]);
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
