// kube-proxy command lines read as kube-proxy reads them: pflag's syntax (parse-flags.ts), then
// options.go's precedence (kube-proxy-precedence.ts), then the configuration; the real ones in
// fixtures/command-lines (SOURCES.md) included.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { parse } from 'yaml';
import { parseFlags } from '../../src/cli/parse-flags.ts';
import { loadProxyConfig } from '../../src/config/config.ts';
import { kubeProxyFlags } from '../../src/config/kube-proxy-precedence.ts';
import { PROXY_FLAGS, proxyFlagOptions } from '../../src/config/proxy-flags.ts';

const OPTIONS = proxyFlagOptions(Object.keys(PROXY_FLAGS));
const FILE = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n';

async function read(args: readonly string[], file = FILE) {
  const parsed = parseFlags(args, OPTIONS);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
  const flags = kubeProxyFlags(parsed.values);
  assert.ok(flags.ok, flags.ok ? '' : flags.error);
  const loaded = await loadProxyConfig(flags.values, {
    hostname: 'host-1',
    readFile: async () => file,
  });
  return { flags, loaded };
}

async function config(args: readonly string[], file = FILE) {
  const { flags, loaded } = await read(args, file);
  assert.ok(loaded.ok, loaded.ok ? '' : loaded.error);
  return { config: loaded.config, warnings: flags.warnings };
}

/** The words after the kube-proxy binary of a shell script (continuation lines joined; no quoting). */
async function commandLine(file: string): Promise<string[]> {
  const text = await readFile(new URL(`fixtures/command-lines/${file}`, import.meta.url), 'utf8');
  const words = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .find((line) => /kube-proxy\s/.test(line))!
    .trim()
    .split(/\s+/);
  return words.slice(words.findIndex((word) => word.endsWith('kube-proxy')) + 1);
}

test('with --config, flags bound to the file are ignored with a warning; -v, --hostname-override, --master apply', async () => {
  const { config: c, warnings } = await config([
    '--config=c.yaml',
    '--proxy-mode=iptables',
    '--kubeconfig=/k',
    '-v=4',
    '--hostname-override=Node-A',
    '--master=https://10.0.0.1:6443',
  ]);
  assert.equal(c.mode, 'ipvs', "the file's mode");
  assert.equal(c.clientConnection.kubeconfig, '');
  assert.equal(c.logging.verbosity, 4);
  assert.equal(c.nodeName, 'node-a');
  assert.equal(c.master, 'https://10.0.0.1:6443');
  assert.deepEqual(warnings, [
    '--proxy-mode is ignored: --config is given, and kube-proxy then reads the file instead',
    '--kubeconfig is ignored: --config is given, and kube-proxy then reads the file instead',
  ]);
});

test('flags without effect here are accepted with one warning each saying why, unless their value asks for nothing', async () => {
  const { warnings } = await config([
    '--vmodule=proxier=4',
    '--logtostderr',
    '--feature-gates=A=true',
    '--bind-address-hard-fail=true',
    '--profiling=false',
  ]);
  assert.deepEqual(
    warnings.map((warning) => warning.split(':')[0]),
    ['--vmodule has no effect', '--logtostderr has no effect', '--feature-gates has no effect'],
  );
  assert.match(warnings[1]!, /a klog flag kube-proxy dropped in 1\.26/);
  assert.match(
    (await config(['--bind-address-hard-fail=false'])).warnings[0]!,
    /^--bind-address-hard-fail has no effect: /,
  );
});

test('--oom-score-adj and --logging-format set their fields; with --config, --logging-format still applies', async () => {
  const { config: c, warnings } = await config([
    '--oom-score-adj=-998',
    '--logging-format=json',
    '--iptables_sync_period=10s',
  ]);
  assert.deepEqual(warnings, []);
  assert.equal(c.oomScoreAdj, -998);
  assert.equal(c.logging.format, 'json');
  assert.equal(c.iptables.syncPeriodMs, 10_000, "component-base's normalization: _ is -");
  const withFile = await config(['--config=c.yaml', '--logging-format=json', '--oom-score-adj=-998']);
  assert.equal(withFile.config.logging.format, 'json');
  assert.equal(withFile.config.oomScoreAdj, -999, 'the file (default), as kube-proxy');
});

test('an empty --metrics-bind-address, or --metrics-port=0, turns the metrics server off', async () => {
  assert.equal((await config(['--metrics-bind-address='])).config.metricsBindAddress, '');
  assert.equal((await config(['--metrics-port=0'])).config.metricsBindAddress, '');
  assert.equal(
    (await config(['--healthz-bind-address=10.0.0.5', '--healthz-port=1234'])).config.healthzBindAddress,
    '10.0.0.5:1234',
  );
  assert.equal(
    (await config(['--config=c.yaml', '--metrics-port=0'])).config.metricsBindAddress,
    '127.0.0.1:10249',
    'not with --config',
  );
});

test('a --hostname-override of only spaces is an error, as kube-proxy', () => {
  assert.deepEqual(kubeProxyFlags({ 'hostname-override': '  ' }), {
    ok: false,
    error: 'empty hostname-override is invalid',
  });
});

test('a zero sync period from a flag is an error, a zero minimum sync period is zero', async () => {
  const { loaded } = await read(['--iptables-sync-period=0']);
  assert.deepEqual(loaded, {
    ok: false,
    error: '--iptables-sync-period: "0" must be greater than 0',
    usage: true,
  });
  assert.equal((await config(['--iptables-min-sync-period=0'])).config.minSyncPeriodMs, 0);
});

test('ran1995ml/Note kube-proxy.sh: IPVS with the nq scheduler', async () => {
  const { config: c, warnings } = await config(await commandLine('ran1995ml-note-kube-proxy.sh'));
  assert.deepEqual(warnings, []);
  assert.equal(c.mode, 'ipvs');
  assert.equal(c.ipvs.scheduler, 'nq');
  assert.deepEqual(c.clusterCIDRs, ['172.7.0.0/16']);
  assert.equal(c.nodeName, 'hdss7-hostid.host.com');
  assert.equal(c.clientConnection.kubeconfig, './conf/kube-proxy.kubeconfig');
});

test('jwreagor/k8s-bare-metal start-kube-proxy.sh: iptables, masquerade-all, -v 2', async () => {
  const { config: c, warnings } = await config(
    await commandLine('jwreagor-k8s-bare-metal-start-kube-proxy.sh'),
  );
  assert.deepEqual(warnings, []);
  assert.equal(c.mode, 'iptables');
  assert.equal(c.masqueradeAll, true);
  assert.equal(c.master, '$' + '{master_ip}', 'the shell variable, unexpanded as the fixture has it');
  assert.equal(c.clientConnection.kubeconfig, '/var/lib/kubelet/kubeconfig');
  assert.equal(c.logging.verbosity, 2);
});

const fixture = (name: string) =>
  readFile(new URL(`fixtures/command-lines/${name}`, import.meta.url), 'utf8');

test("kops's kube-proxy static Pod: --oom-score-adj applies, klog's removed flags warn", async () => {
  const task = parse(await fixture('kops-golden-minimal-tasks-kube-proxy.yaml'));
  const container = parse(task.contents).spec.containers[0];
  assert.deepEqual(container.command, ['/usr/local/bin/kube-proxy']);
  const { config: c, warnings } = await config(container.args);
  assert.deepEqual(
    warnings.map((warning) => warning.split(':')[0]),
    ['--logtostderr has no effect', '--alsologtostderr has no effect', '--log-file has no effect'],
  );
  assert.equal(c.oomScoreAdj, -998);
  assert.deepEqual(c.clusterCIDRs, ['100.96.0.0/11']);
  assert.equal(c.conntrack.maxPerCore, 131072);
  assert.equal(c.nodeName, '@aws');
  assert.equal(c.master, 'https://127.0.0.1');
  assert.equal(c.clientConnection.kubeconfig, '/var/lib/kube-proxy/kubeconfig');
  assert.equal(c.logging.verbosity, 2);
  assert.equal(c.mode, 'nftables', "no mode: kproxy's default");
  assert.equal(c.modeDefaulted, true);
});

test('kubeadm\'s DaemonSet: the file (mode: "", as kubeadm writes it) plus --hostname-override', async () => {
  const template = await fixture('kubeadm-kube-proxy-daemonset.yaml.tmpl');
  // Filled in as kubeadm does; $(NODE_NAME) as the kubelet expands it.
  const manifest = parse(
    template
      .replaceAll('{{ .Image }}', 'registry.k8s.io/kube-proxy:v1.37.0')
      .replaceAll('{{ .ProxyConfigMapKey }}', 'config.conf')
      .replaceAll('{{ .ProxyConfigMap }}', 'kube-proxy'),
  );
  const [binary, ...args] = manifest.spec.template.spec.containers[0].command as string[];
  assert.equal(binary, '/usr/local/bin/kube-proxy');
  const expanded = args.map((arg) => arg.replaceAll('$(NODE_NAME)', 'Worker-3'));
  const file = `${FILE.replace('mode: ipvs', 'mode: ""')}clusterCIDR: 10.244.0.0/16\n`;
  const { config: c, warnings } = await config(expanded, file);
  assert.deepEqual(warnings, []);
  assert.equal(c.nodeName, 'worker-3', '--hostname-override applies with --config');
  assert.deepEqual(c.clusterCIDRs, ['10.244.0.0/16']);
  assert.equal(c.mode, 'nftables');
  assert.equal(c.modeDefaulted, true, 'mode: "" is no mode');
});

test("k3s's kube-proxy arguments: a bare --healthz-bind-address IP gets the port, zero conntrack settings leave the kernel's", async () => {
  const source = await fixture('k3s-agent-linux-kube-proxy-args.go.txt');
  const literal = [...source.matchAll(/^\t\t"([a-z-]+)": +"([^"]*)",$/gm)].map(
    ([, key, value]) => `--${key}=${value}`,
  );
  // The cfg values, as a single-stack k3s agent named node-1 has them.
  const args = [
    ...literal,
    '--kubeconfig=/var/lib/rancher/k3s/agent/kubeproxy.kubeconfig',
    '--cluster-cidr=10.42.0.0/16',
    '--hostname-override=node-1',
  ];
  assert.equal(literal.length, 5);
  const { config: c, warnings } = await config(args);
  assert.deepEqual(warnings, []);
  assert.equal(c.mode, 'iptables');
  assert.equal(c.healthzBindAddress, '127.0.0.1:10256');
  assert.equal(c.conntrack.maxPerCore, 0);
  assert.equal(c.conntrack.tcpEstablishedTimeoutMs, 0);
  assert.equal(c.conntrack.tcpCloseWaitTimeoutMs, 0);
  assert.equal(c.nodeName, 'node-1');
});

test("usernetes' rootless kube-proxy: its heredoc file through --config, conntrack left to the host, extra flags ignored as kube-proxy ignores them", async () => {
  const script = await fixture('usernetes-boot-kube-proxy.sh');
  const vars = (text: string) =>
    text.replaceAll('$XDG_CONFIG_HOME', '/home/u/.config').replaceAll('$XDG_RUNTIME_DIR', '/run/user/1000');
  const file = vars(/<<EOF\n([\s\S]*?)\nEOF\n/.exec(script)![1]!);
  const words = vars(script.replace(/\\\n/g, ' '))
    .split('\n')
    .find((line) => line.startsWith('exec '))!
    .trim()
    .split(/\s+/);
  // "$@": the arguments usernetes was started with; here, one a user might add.
  const args = [...words.slice(words.indexOf('kube-proxy') + 1, -1), '--conntrack-min=0'];
  assert.deepEqual(args, [
    '--config',
    '/run/user/1000/usernetes/kube-proxy-config.yaml',
    '--conntrack-min=0',
  ]);
  const { config: c, warnings } = await config(args, `${file}\nhostnameOverride: node-1\n`);
  assert.equal(c.mode, 'iptables');
  assert.equal(c.clientConnection.kubeconfig, '/home/u/.config/usernetes/node/kube-proxy.kubeconfig');
  assert.equal(c.conntrack.maxPerCore, 0);
  assert.equal(c.conntrack.tcpEstablishedTimeoutMs, 0);
  assert.equal(c.conntrack.tcpCloseWaitTimeoutMs, 0);
  assert.equal(c.conntrack.min, 131072, '--conntrack-min is ignored beside --config');
  assert.deepEqual(warnings, [
    '--conntrack-min is ignored: --config is given, and kube-proxy then reads the file instead',
  ]);
});

const configFile = (name: string) =>
  readFile(new URL(`fixtures/config-files/${name}`, import.meta.url), 'utf8');

test("Talos' kube-proxy DaemonSets (golden outputs): the flags-only one, and --config with --hostname-override", async () => {
  const commandOf = async (name: string) =>
    parse(await fixture(name)).spec.template.spec.containers[0].command as string[];
  const [binary, ...args] = await commandOf('talos-kube-proxy-daemonset.yaml');
  assert.equal(binary, '/usr/local/bin/kube-proxy');
  const flagsOnly = await config(args);
  assert.deepEqual(flagsOnly.warnings, []);
  assert.equal(flagsOnly.config.mode, 'iptables');
  assert.equal(flagsOnly.config.modeDefaulted, false);

  const [, ...withConfig] = await commandOf('talos-kube-proxy-daemonset-with-config.yaml');
  assert.deepEqual(withConfig, [
    '--config=/var/lib/kube-proxy/config.conf',
    '--hostname-override=$(NODE_NAME)',
  ]);
  // The ConfigMap Talos mounts there (config-files/talos-kube-proxy-configmap.yaml); $(NODE_NAME) as the kubelet expands it.
  const file = parse(await configFile('talos-kube-proxy-configmap.yaml')).data['config.conf'] as string;
  const { config: c, warnings } = await config(
    withConfig.map((arg) => arg.replace('$(NODE_NAME)', 'talos-worker-1')),
    file,
  );
  assert.deepEqual(warnings, []);
  assert.equal(c.mode, 'nftables');
  assert.equal(c.nodeName, 'talos-worker-1');
  assert.equal(c.conntrack.maxPerCore, 0);
});

test("OpenShift's standalone kube-proxy (cluster-network-operator): bash's exec line with the operator's config", async () => {
  const manifest = await fixture('openshift-cno-bindata-kube-proxy.yaml');
  const line = /- exec \/usr\/bin\/kube-proxy (.*)$/m.exec(manifest)?.[1];
  // bash's "${K8S_NODE_NAME}", written so that it is not read as a template placeholder.
  const nodeNameWord = `"$${'{'}K8S_NODE_NAME}"`;
  assert.equal(line, `--config=/config/kube-proxy-config.yaml --hostname-override ${nodeNameWord}`);
  // bash's words, with K8S_NODE_NAME (spec.nodeName) expanded and the quotes removed.
  const args = line.replace(nodeNameWord, 'Master-0.ocp.example').split(' ');
  // The file the operator writes into that ConfigMap, as its own test expects it (config-files/).
  const expected = [
    ...(await configFile('openshift-cno-kube-proxy_test.go.txt')).matchAll(
      /MatchYAML\(`\n?(apiVersion: kubeproxy\.config\.k8s\.io\/v1alpha1\n[\s\S]*?)`\)\)/g,
    ),
  ].map((match) => match[1]!);
  const { config: c, warnings } = await config(args, expected[2]);
  assert.deepEqual(warnings, []);
  assert.equal(c.mode, 'iptables');
  assert.equal(c.nodeName, 'master-0.ocp.example');
  assert.equal(c.syncPeriodMs, 42_000);
});

test("AKS's managed kube-proxy (ps on a node): pods found by interface prefix, conntrack left to the host", async () => {
  const transcript = await fixture('aks-node-kube-proxy.md');
  const line = /^root .* kube-proxy (--.*)$/m.exec(transcript)?.[1];
  assert.ok(line !== undefined);
  const { config: c, warnings } = await config(line.split(' '));
  assert.deepEqual(warnings, []);
  assert.equal(c.detectLocalMode, 'InterfaceNamePrefix');
  assert.equal(c.detectLocal.interfaceNamePrefix, 'azv');
  assert.deepEqual(c.clusterCIDRs, ['10.244.0.0/16']);
  assert.equal(c.conntrack.maxPerCore, 0);
  assert.equal(c.metricsBindAddress, '0.0.0.0:10249');
  assert.equal(c.logging.verbosity, 3);
  assert.equal(c.mode, 'nftables', "no mode: kproxy's default (AKS's kube-proxy runs iptables)");
  assert.equal(c.modeDefaulted, true);
});

test("EKS's Bottlerocket advice: the conntrack flags it adds beside --config are ignored, as kube-proxy ignores them", async () => {
  const page = await fixture('eks-launch-node-bottlerocket.adoc');
  const block = /\[source,yaml[^\]]*\]\n----\n( +containers:\n[\s\S]*?)\n----\n/.exec(page)?.[1];
  assert.ok(block !== undefined);
  const [binary, ...args] = parse(block).containers[0].command as string[];
  assert.equal(binary, 'kube-proxy');
  assert.deepEqual(args, [
    '--v=2',
    '--config=/var/lib/kube-proxy-config/config',
    '--conntrack-max-per-core=0',
    '--conntrack-min=0',
  ]);
  // EKS's kube-proxy-config file is not in the page; the corpus' minimal one stands in for it.
  const { config: c, warnings } = await config(args);
  assert.deepEqual(warnings, [
    '--conntrack-max-per-core is ignored: --config is given, and kube-proxy then reads the file instead',
    '--conntrack-min is ignored: --config is given, and kube-proxy then reads the file instead',
  ]);
  assert.equal(c.conntrack.maxPerCore, 32768, "the file's (default), not the flag's 0");
  assert.equal(c.logging.verbosity, 2);
});

test("GKE's kube-proxy static Pod (a 1.34 node): sh -c's words, its feature gates said to do nothing", async () => {
  const pod = parse(await fixture('gke-node-kube-proxy-pod.yaml'));
  const [shell, flag, script] = pod.spec.containers[0].command as string[];
  assert.deepEqual([shell, flag], ['/bin/sh', '-c']);
  // sh's words after `exec kube-proxy`, without the redirections of its output.
  const words = script!.split(/\s+/).filter((word) => word !== '' && !/^\d?>/.test(word));
  assert.deepEqual(words.slice(0, 2), ['exec', 'kube-proxy']);
  const { config: c, warnings } = await config(words.slice(2));
  assert.deepEqual(
    warnings.map((warning) => warning.split(':')[0]),
    ['--feature-gates has no effect'],
  );
  assert.equal(c.master, 'https://10.142.0.7');
  assert.equal(c.clientConnection.kubeconfig, '/var/lib/kube-proxy/kubeconfig');
  assert.deepEqual(c.clusterCIDRs, ['10.44.0.0/14']);
  assert.equal(c.oomScoreAdj, -998);
  assert.equal(c.logging.verbosity, 2);
  assert.equal(c.detectLocalMode, 'NodeCIDR');
  assert.equal(c.iptables.syncPeriodMs, 60_000);
  assert.equal(c.iptables.minSyncPeriodMs, 10_000);
  assert.equal(c.ipvs.syncPeriodMs, 60_000);
  assert.equal(c.ipvs.minSyncPeriodMs, 10_000);
  assert.equal(c.mode, 'nftables', "no mode: kproxy's default (GKE's kube-proxy runs iptables)");
  // kube-proxy binds --iptables-sync-period and --iptables-min-sync-period to nftables' too.
  assert.equal(c.syncPeriodMs, 60_000);
  assert.equal(c.minSyncPeriodMs, 10_000);
});
