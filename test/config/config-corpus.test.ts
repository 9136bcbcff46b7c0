// Real kube-proxy configuration files and kubeconfigs (fixtures/config-files, sources in its
// SOURCES.md) load as kube-proxy loads them: the fields each sets reach the configuration, and the
// warnings at start are the lenient decoding's and those of fields that do nothing here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parse } from 'yaml';
import { makeTestPki } from '../../harness/apiserver/certs.ts';
import { loadProxyConfig } from '../../src/config/config.ts';
import { formatConfigError } from '../../src/kube/connection.ts';
import { loadKubeconfig } from '../../src/kube/kubeconfig.ts';

const FIXTURES = new URL('fixtures/config-files/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES), 'utf8');
const SECOND = 1000;
const HOUR = 3600 * SECOND;

/** Loads `text` as `kproxy run --config FILE` does, on a machine called node-1. */
async function loadFile(file: string, text: string) {
  const loaded = await loadProxyConfig(
    { config: file },
    {
      hostname: 'node-1',
      readFile: async (path) => {
        assert.equal(path, file);
        return text;
      },
    },
  );
  assert.ok(loaded.ok, !loaded.ok ? loaded.error : '');
  return loaded;
}

/** The body of a shell script's `<<EOF` heredoc, its variables expanded as the shell would. */
function heredoc(script: string, variables: Readonly<Record<string, string>>): string {
  const body = /<<EOF\n([\s\S]*?)\nEOF\n/.exec(script)?.[1];
  assert.ok(body !== undefined, 'the script has a heredoc');
  return `${body.replace(/\$\{?(\w+)\}?/g, (_, name: string) => {
    const value = variables[name];
    assert.ok(value !== undefined, `$${name} has a value`);
    return value;
  })}\n`;
}

const BIND_HARD_FAIL =
  'bindAddressHardFail: false has no effect: kproxy always exits when it cannot listen on healthzBindAddress or metricsBindAddress';
const LENIENT = 'using lenient decoding as strict decoding failed: strict decoding error:';

test("kubeadm's ConfigMap (kube-proxy v1.34.0): config.conf loads with kube-proxy's defaults for its zero values", async () => {
  const transcript = fixture('nectar-kube-proxy.md');
  const dump = /k get cm -n kube-system kube-proxy -o yaml\n([\s\S]*?)\n\ncontrolplane/.exec(transcript)?.[1];
  assert.ok(dump !== undefined);
  const configMap = parse(dump) as { data: Record<string, string> };
  const { config, warnings } = await loadFile(
    '/var/lib/kube-proxy/config.conf',
    configMap.data['config.conf']!,
  );
  assert.deepEqual(warnings, [`/var/lib/kube-proxy/config.conf: ${BIND_HARD_FAIL}`]);
  assert.deepEqual(config.clusterCIDRs, ['172.17.0.0/16']);
  assert.deepEqual(config.clientConnection, {
    kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
    qps: 5,
    burst: 10,
  });
  assert.equal(config.bindAddress, '0.0.0.0');
  assert.deepEqual(config.nodeIPs, []);
  assert.equal(config.nodeName, 'node-1');
  assert.equal(config.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(config.metricsBindAddress, '127.0.0.1:10249');
  assert.equal(config.detectLocalMode, 'ClusterCIDR');
  assert.deepEqual(config.iptables, {
    masqueradeAll: false,
    masqueradeBit: 14,
    syncPeriodMs: 30 * SECOND,
    minSyncPeriodMs: SECOND,
    localhostNodePorts: true,
  });
  assert.deepEqual(config.conntrack, {
    maxPerCore: 32 * 1024,
    min: 128 * 1024,
    tcpEstablishedTimeoutMs: 24 * HOUR,
    tcpCloseWaitTimeoutMs: HOUR,
    tcpBeLiberal: false,
    udpTimeoutMs: 0,
    udpStreamTimeoutMs: 0,
  });
  assert.equal(config.oomScoreAdj, -999);
  assert.deepEqual(config.logging, { verbosity: 0, format: 'text' });
  // mode "" is left to kproxy's default, which issue 30's part 1 settles; it is not asserted here.
});

test("kubeadm's kubeconfig.conf: the in-pod service-account CA and token, named when they are not there", async () => {
  const dump = /-o yaml\n(apiVersion: v1\ndata:[\s\S]*?)\n\ncontrolplane/.exec(
    fixture('nectar-kube-proxy.md'),
  )?.[1];
  const kubeconfig = (parse(dump!) as { data: Record<string, string> }).data['kubeconfig.conf']!;
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-corpus-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  // Outside a pod the service-account files are missing: the error names the field and the path.
  writeFileSync(join(dir, 'kubeconfig.conf'), kubeconfig);
  const outside = await loadKubeconfig([join(dir, 'kubeconfig.conf')]);
  assert.ok(!outside.ok);
  assert.match(
    formatConfigError(outside.error),
    /kubeconfig\.conf: clusters\[0\]\.cluster\.certificate-authority: .*\/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/ca\.crt/,
  );
  // In a pod they are there: the same file, with the mount moved into this test's directory.
  const pki = makeTestPki();
  after(() => rmSync(pki.dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'ca.crt'), pki.caCert);
  writeFileSync(join(dir, 'token'), 'service-account-token\n');
  writeFileSync(
    join(dir, 'in-pod.conf'),
    kubeconfig.replaceAll('/var/run/secrets/kubernetes.io/serviceaccount/', `${dir}/`),
  );
  const inPod = await loadKubeconfig([join(dir, 'in-pod.conf')]);
  assert.ok(inPod.ok, !inPod.ok ? formatConfigError(inPod.error) : '');
  assert.equal(inPod.connection.server, 'https://controlplane:6443');
  assert.equal(inPod.connection.ca, pki.caCert);
  assert.equal(await inPod.connection.tokenSource?.token(), 'service-account-token');
});

/** kind's KubeProxyConfiguration template (the last of config.go), rendered as Config() renders it: rootful, no feature gates. */
function kindKubeProxyConfig(mode: 'iptables' | 'nftables'): string {
  const source = fixture('kind-config.go.txt');
  const start = source.lastIndexOf('{{if ne .KubeProxyMode "none"}}\n---\n');
  const template = source.slice(start, source.indexOf('{{end}}{{end}}\n`', start));
  return template
    .replace('{{if ne .KubeProxyMode "none"}}\n', '')
    .replace(/\{\{if \.FeatureGates\}\}[\s\S]*?\{\{- end\}\}/, '')
    .replaceAll('{{ .KubeProxyMode }}', mode)
    .replace(
      /\{\{if and \(eq \.KubeProxyMode "nftables"\) \(not \.RootlessProvider\)\}\}([\s\S]*?)\{\{end\}\}/,
      (_, body) => (mode === 'nftables' ? body : ''),
    )
    .replace(/\{\{if \.RootlessProvider\}\}[\s\S]*$/, '');
}

test("kind's KubeProxyConfiguration: its metadata fails only the strict decoding, as in kube-proxy", async () => {
  for (const mode of ['iptables', 'nftables'] as const) {
    const text = kindKubeProxyConfig(mode);
    assert.match(
      text,
      /^---\napiVersion: kubeproxy\.config\.k8s\.io\/v1alpha1\nkind: KubeProxyConfiguration\nmetadata:\n {2}name: config\n/,
    );
    const { config, warnings } = await loadFile('kind.yaml', text);
    assert.deepEqual(warnings, [`kind.yaml: ${LENIENT} unknown field "metadata"`], mode);
    assert.equal(config.mode, mode);
    assert.equal(config.iptables.minSyncPeriodMs, SECOND);
    // maxPerCore 0: leave nf_conntrack_max alone (a global kind's nodes share with the host).
    assert.equal(config.conntrack.maxPerCore, 0);
    assert.equal(config.conntrack.tcpBeLiberal, mode === 'nftables');
  }
});

test("usernetes' config: its feature gate is said to have no effect", async () => {
  const text = heredoc(fixture('usernetes-kube-proxy.sh'), { XDG_CONFIG_HOME: '/home/user/.config' });
  const { config, warnings } = await loadFile('kube-proxy-config.yaml', text);
  assert.deepEqual(warnings, [
    'kube-proxy-config.yaml: featureGates: {"EndpointSliceProxying":false} has no effect: kproxy has no feature gates: what it implements is always on',
  ]);
  assert.equal(config.mode, 'iptables');
  assert.equal(config.clientConnection.kubeconfig, '/home/user/.config/usernetes/node/kube-proxy.kubeconfig');
});

test("a 1.1x binary install's config: removed and misplaced fields load leniently, protobuf and configSyncPeriod are said to do nothing", async () => {
  const script = fixture('binary-install-kube-proxy-config.sh');
  const text = heredoc(script, { NODEADDRESS: '10.0.0.5', CFGPATH: '/k8s/kubernetes/cfg' });
  const { config, warnings } = await loadFile('/k8s/kubernetes/kube-proxy.conf', text);
  const file = '/k8s/kubernetes/kube-proxy.conf';
  assert.deepEqual(warnings, [
    `${file}: ${LENIENT} unknown field "conntrack.max", unknown field "ipvs.masqueradeAll", unknown field "udpIdleTimeout"`,
    `${file}: clientConnection.contentType: "application/vnd.kubernetes.protobuf" has no effect: kproxy always sends JSON`,
    `${file}: configSyncPeriod: "15m0s" has no effect: kproxy's informers never relist on a timer; a watch that ends is resumed`,
  ]);
  assert.equal(config.mode, 'ipvs');
  assert.equal(config.bindAddress, '10.0.0.5');
  assert.deepEqual(config.nodeIPs, ['10.0.0.5'], 'a specific bindAddress is the node IP');
  assert.equal(config.nodeName, '10.0.0.5');
  assert.deepEqual(config.clientConnection, {
    kubeconfig: '/k8s/kubernetes/cfg/kube-proxy.kubeconfig',
    qps: 5,
    burst: 10,
  });
  assert.deepEqual(config.clusterCIDRs, ['10.100.0.0/16']);
  assert.equal(config.ipvs.scheduler, 'rr');
  assert.equal(config.ipvs.syncPeriodMs, 30 * SECOND);
  assert.equal(config.ipvs.minSyncPeriodMs, 5 * SECOND);
  // ipvs mode takes its masquerade settings from the iptables section (ipvs.masqueradeAll is not a field).
  assert.equal(config.masqueradeAll, false);
  assert.equal(config.masqueradeBit, 14);
  assert.equal(config.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(config.metricsBindAddress, '127.0.0.1:10249');
  assert.equal(config.oomScoreAdj, -999);
  assert.equal(config.conntrack.tcpEstablishedTimeoutMs, 24 * HOUR);
});

test("minikube's kubeadm config (its v1.36 golden file): the KubeProxyConfiguration document loads without a warning", async () => {
  // kubeadm reads each `---` document of its config file; the KubeProxyConfiguration one is kube-proxy's.
  const documents = fixture('minikube-v1.36-options.yaml').split(/^---\n/m);
  const text = documents.find((document) => /^kind: KubeProxyConfiguration$/m.test(document));
  assert.ok(text !== undefined);
  const { config, warnings } = await loadFile('config.conf', text);
  assert.deepEqual(warnings, []);
  assert.equal(config.mode, 'iptables');
  assert.deepEqual(config.clusterCIDRs, ['10.244.0.0/16']);
  assert.equal(config.metricsBindAddress, '0.0.0.0:10249');
  // Zeros that mean "leave the host's conntrack settings alone" (minikube's nodes may be containers).
  assert.equal(config.conntrack.maxPerCore, 0);
  assert.equal(config.conntrack.tcpEstablishedTimeoutMs, 0);
  assert.equal(config.conntrack.tcpCloseWaitTimeoutMs, 0);
});

test("Talos' kube-proxy ConfigMap (its template's golden output): nftables, conntrack left to the host", async () => {
  const configMap = parse(fixture('talos-kube-proxy-configmap.yaml')) as { data: Record<string, string> };
  const { config, warnings } = await loadFile(
    '/var/lib/kube-proxy/config.conf',
    configMap.data['config.conf']!,
  );
  assert.deepEqual(warnings, []);
  assert.equal(config.mode, 'nftables');
  assert.equal(config.modeDefaulted, false);
  assert.deepEqual(config.clusterCIDRs, ['10.244.0.0/16']);
  assert.equal(config.clientConnection.kubeconfig, '/etc/kubernetes/kubeconfig');
  // Talos sets maxPerCore 0 unless told otherwise: nf_conntrack_max stays as the host has it.
  assert.equal(config.conntrack.maxPerCore, 0);
  assert.equal(config.nftables.syncPeriodMs, 30 * SECOND);
});

test("Talos' in-cluster kubeconfig: the service-account CA and token, against https://localhost:6443", async () => {
  const configMap = parse(fixture('talos-kubeconfig-in-cluster.yaml')) as { data: Record<string, string> };
  const kubeconfig = configMap.data.kubeconfig!;
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-corpus-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const pki = makeTestPki();
  after(() => rmSync(pki.dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'ca.crt'), pki.caCert);
  writeFileSync(join(dir, 'token'), 'talos-token\n');
  writeFileSync(
    join(dir, 'kubeconfig'),
    kubeconfig.replaceAll('/var/run/secrets/kubernetes.io/serviceaccount/', `${dir}/`),
  );
  const loaded = await loadKubeconfig([join(dir, 'kubeconfig')]);
  assert.ok(loaded.ok, !loaded.ok ? formatConfigError(loaded.error) : '');
  assert.equal(loaded.connection.server, 'https://localhost:6443');
  assert.equal(loaded.connection.ca, pki.caCert);
  assert.equal(await loaded.connection.tokenSource?.token(), 'talos-token');
});

/** The lines of kubespray's template that are not Jinja statements or comments, `{{ ... }}` as a wildcard. */
function templateLinePatterns(template: string): RegExp[] {
  return template
    .split('\n')
    .filter((line) => !/^\s*\{[%#]/.test(line))
    .map((line) => {
      const parts = line.split(/\{\{.*?\}\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      return new RegExp(`^${parts.join('.*')}$`);
    });
}

test("kubespray's KubeProxyConfiguration (its template rendered with its defaults): ipvs, protobuf and configSyncPeriod said to do nothing", async () => {
  const template = fixture('kubespray-kubeadm-config.v1beta4.yaml.j2');
  const document = template.slice(
    template.indexOf('---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\n'),
    template.indexOf('{# DNS settings for kubelet #}'),
  );
  const rendered = fixture('kubespray-kube-proxy-config.rendered.yaml');
  // Each rendered line is the next line of the template's document (or a later one: the skipped
  // featureGates block), with its expressions filled in: the rendering is of this template.
  const patterns = templateLinePatterns(document);
  let next = 0;
  for (const line of rendered.replace(/\n$/, '').split('\n')) {
    while (next < patterns.length && !patterns[next]!.test(line)) next++;
    assert.ok(next < patterns.length, `rendered line ${JSON.stringify(line)} is not the template's`);
    next++;
  }
  const file = '/etc/kubernetes/kubeadm-config.yaml';
  const { config, warnings } = await loadFile(file, rendered);
  assert.deepEqual(warnings, [
    `${file}: clientConnection.contentType: "application/vnd.kubernetes.protobuf" has no effect: kproxy always sends JSON`,
    `${file}: configSyncPeriod: "15m0s" has no effect: kproxy's informers never relist on a timer; a watch that ends is resumed`,
  ]);
  assert.equal(config.mode, 'ipvs');
  assert.equal(config.nodeName, 'node1', 'hostnameOverride: the inventory name');
  assert.deepEqual(config.clusterCIDRs, ['10.233.64.0/18']);
  // Empty template values are YAML nulls: kube-proxy's defaults.
  assert.deepEqual(config.clientConnection, { kubeconfig: '', qps: 5, burst: 10 });
  // Python's False, as Ansible renders a boolean, is a YAML boolean.
  assert.equal(config.ipvs.strictARP, false);
  assert.equal(config.masqueradeAll, false);
  assert.equal(config.ipvs.scheduler, 'rr');
  assert.equal(config.ipvs.minSyncPeriodMs, 0);
  assert.equal(config.minSyncPeriodMs, 0, "ipvs mode's own minSyncPeriod: 0s stays 0");
  assert.equal(
    config.iptables.minSyncPeriodMs,
    SECOND,
    "the iptables section's 0s is kube-proxy's default, 1s",
  );
  assert.deepEqual(config.nodePortAddresses, []);
  assert.equal(config.oomScoreAdj, -999);
  assert.equal(config.conntrack.maxPerCore, 32768);
});

/** The KubeProxyConfiguration documents cluster-network-operator's tests expect it to write. */
function openshiftConfigs(): string[] {
  return [
    ...fixture('openshift-cno-kube-proxy_test.go.txt').matchAll(
      /MatchYAML\(`\n?(apiVersion: kubeproxy\.config\.k8s\.io\/v1alpha1\n[\s\S]*?)`\)\)/g,
    ),
  ].map((match) => match[1]!);
}

test("OpenShift's kube-proxy config (cluster-network-operator): every field serialized, nulls and Windows' section included", async () => {
  const documents = openshiftConfigs();
  assert.equal(documents.length, 3);
  // The standalone kube-proxy's ConfigMap: the file /config/kube-proxy-config.yaml.
  const file = '/config/kube-proxy-config.yaml';
  const { config, warnings } = await loadFile(file, documents[2]!);
  assert.deepEqual(warnings, [`${file}: ${BIND_HARD_FAIL}`]);
  assert.equal(config.mode, 'iptables');
  assert.deepEqual(config.clusterCIDRs, ['192.168.0.0/14']);
  assert.equal(config.syncPeriodMs, 42 * SECOND);
  // null and 0s are kube-proxy's defaults.
  assert.equal(config.masqueradeBit, 14);
  assert.equal(config.iptables.minSyncPeriodMs, SECOND);
  assert.equal(config.conntrack.maxPerCore, 32 * 1024);
  assert.equal(config.conntrack.tcpCloseWaitTimeoutMs, HOUR);
  assert.equal(config.oomScoreAdj, -999);
  assert.equal(config.healthzBindAddress, '0.0.0.0:10255');
  assert.equal(config.metricsBindAddress, '0.0.0.0:29102');
  // The two others are the operator's unit-test inputs with `mode: blah`: refused, as kube-proxy refuses them.
  for (const document of documents.slice(0, 2)) {
    const loaded = await loadProxyConfig(
      { config: file },
      { hostname: 'node-1', readFile: async () => document },
    );
    assert.ok(!loaded.ok);
    assert.match(loaded.error, /^\/config\/kube-proxy-config\.yaml: mode: "blah" is not one of /);
  }
});

test("Cluster API (CAREN's kubeadm customization): the KubeProxyConfiguration appended to kubeadm's config", async () => {
  const page = fixture('capi-caren-kube-proxy-mode.md');
  // The file's content as the KubeadmConfigSpec writes it: the block scalar under `content: |-`.
  const spec = /```yaml\n(\s*spec:\n[\s\S]*?)\n\s*```/.exec(page)?.[1];
  assert.ok(spec !== undefined);
  const files = (
    parse(spec.replace(/^ {4}/gm, '')) as {
      spec: { template: { spec: { kubeadmConfigSpec: { files: { path: string; content: string }[] } } } };
    }
  ).spec.template.spec.kubeadmConfigSpec.files;
  assert.equal(files[0]!.path, '/etc/kubernetes/kubeproxy-config.yaml');
  const { config, warnings } = await loadFile(files[0]!.path, files[0]!.content);
  assert.deepEqual(warnings, []);
  assert.equal(config.mode, 'nftables');
  assert.equal(config.modeDefaulted, false);
});
