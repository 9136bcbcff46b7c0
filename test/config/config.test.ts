import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { parseFlags } from '../../src/cli/parse-flags.ts';
import { type ConfigEnvironment, loadProxyConfig, resolveProxyConfig } from '../../src/config/config.ts';
import { PROXY_FLAG_OPTIONS } from '../../src/config/proxy-flags.ts';

const HEADER = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

function environment(files: Record<string, string> = {}): ConfigEnvironment {
  return {
    hostname: 'Worker-7.example',
    readFile: async (path) => {
      const text = files[path];
      if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
      return text;
    },
  };
}

async function load(args: string[], files: Record<string, string> = {}) {
  const flags = parseFlags(args, PROXY_FLAG_OPTIONS);
  assert.ok(flags.ok, !flags.ok ? flags.error : '');
  return loadProxyConfig(flags.values, environment(files));
}

async function loadOk(args: string[], files: Record<string, string> = {}) {
  const result = await load(args, files);
  assert.ok(result.ok, !result.ok ? result.error : '');
  return result.config;
}

test('with nothing set, every field has kube-proxy’s default (the mode: kproxy’s nftables)', async () => {
  const config = await loadOk([]);
  assert.equal(config.mode, 'nftables');
  assert.equal(config.nodeName, 'worker-7.example', 'the hostname, lower-cased');
  assert.deepEqual(config.nodeIPs, []);
  assert.equal(config.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(config.metricsBindAddress, '127.0.0.1:10249');
  assert.equal(config.detectLocalMode, 'ClusterCIDR');
  assert.deepEqual(config.clusterCIDRs, []);
  assert.deepEqual(config.nodePortAddresses, ['primary'], 'nftables: the primary node IPs, as kube-proxy');
  assert.equal(config.masqueradeAll, false);
  assert.equal(config.masqueradeBit, 14);
  assert.equal(config.syncPeriodMs, 30_000);
  assert.equal(config.minSyncPeriodMs, 1000);
  assert.equal(config.iptables.localhostNodePorts, true);
  assert.equal(config.ipvs.scheduler, 'rr');
  assert.equal(config.ipvs.minSyncPeriodMs, 0);
  assert.deepEqual(config.conntrack, {
    maxPerCore: 32768,
    min: 131072,
    tcpEstablishedTimeoutMs: 86_400_000,
    tcpCloseWaitTimeoutMs: 3_600_000,
    tcpBeLiberal: false,
    udpTimeoutMs: 0,
    udpStreamTimeoutMs: 0,
  });
  assert.deepEqual(config.clientConnection, { kubeconfig: '', qps: 5, burst: 10 });
  assert.equal(config.logging.verbosity, 0);
});

test('flags override the config file', async () => {
  const files = {
    '/etc/kproxy/config.yaml': `${HEADER}mode: nftables\nhostnameOverride: node-1\nclusterCIDR: 10.244.0.0/16\nnftables:\n  masqueradeBit: 5\n  syncPeriod: 1m\n`,
  };
  const config = await loadOk(
    [
      '--config=/etc/kproxy/config.yaml',
      '--node',
      'node-2',
      '--iptables-masquerade-bit',
      '7',
      '--cluster-cidr',
      '10.100.0.0/16,fd00:100::/56',
    ],
    files,
  );
  assert.equal(config.mode, 'nftables');
  assert.equal(config.nodeName, 'node-2');
  assert.equal(config.masqueradeBit, 7);
  assert.equal(config.syncPeriodMs, 60_000, 'from the file, untouched by flags');
  assert.deepEqual(config.clusterCIDRs, ['10.100.0.0/16', 'fd00:100::/56']);
});

test('--masquerade-all=false overrides masqueradeAll: true in the file', async () => {
  const files = { 'c.yaml': `${HEADER}mode: nftables\nnftables:\n  masqueradeAll: true\n` };
  assert.equal((await loadOk(['--config', 'c.yaml'], files)).masqueradeAll, true);
  assert.equal((await loadOk(['--config', 'c.yaml', '--masquerade-all=false'], files)).masqueradeAll, false);
});

test('the active mode’s section wins over the top-level field, which wins over the default', async () => {
  const files = {
    'c.yaml': `${HEADER}mode: nftables\nsyncPeriod: 10s\nminSyncPeriod: 2s\nnftables:\n  syncPeriod: 20s\n`,
  };
  const config = await loadOk(['--config', 'c.yaml'], files);
  assert.equal(config.syncPeriodMs, 20_000);
  assert.equal(config.minSyncPeriodMs, 2000);
  assert.equal(config.iptables.syncPeriodMs, 10_000, 'other sections fall back to the top level too');
});

test('ipvs mode takes its periods from ipvs and its masquerade settings from iptables', async () => {
  const config = await loadOk([
    '--proxy-mode=ipvs',
    '--ipvs-sync-period=45s',
    '--iptables-masquerade-bit=12',
    '--ipvs-scheduler=lc',
  ]);
  assert.equal(config.syncPeriodMs, 45_000);
  assert.equal(config.masqueradeBit, 12);
  assert.equal(config.ipvs.scheduler, 'lc');
});

test('fullSyncPeriod: hourly by default, set by flag, 0 turns it off', async () => {
  assert.equal((await loadOk([])).fullSyncPeriodMs, 3_600_000);
  assert.equal((await loadOk(['--full-sync-period=10m'])).fullSyncPeriodMs, 600_000);
  assert.equal((await loadOk(['--full-sync-period=0s'])).fullSyncPeriodMs, 0);
});

test('--node-ip is repeatable and canonicalised; --bind-address is a node IP unless unspecified', async () => {
  assert.deepEqual((await loadOk(['--node-ip', '192.168.10.11', '--node-ip', 'FD00::0011'])).nodeIPs, [
    '192.168.10.11',
    'fd00::11',
  ]);
  assert.deepEqual((await loadOk(['--bind-address', '192.168.10.12'])).nodeIPs, ['192.168.10.12']);
  assert.deepEqual((await loadOk(['--bind-address', '0.0.0.0'])).nodeIPs, []);
  assert.deepEqual((await loadOk(['--bind-address', '::'])).nodeIPs, []);
});

test('an IPv6 bind address moves the default health and metrics addresses to IPv6', async () => {
  const config = await loadOk(['--bind-address', '::']);
  assert.equal(config.healthzBindAddress, '[::]:10256');
  assert.equal(config.metricsBindAddress, '[::1]:10249');
});

test('a bind address without a port gets the default port', async () => {
  const config = await loadOk(['--healthz-bind-address', '127.0.0.1', '--metrics-bind-address', '::1']);
  assert.equal(config.healthzBindAddress, '127.0.0.1:10256');
  assert.equal(config.metricsBindAddress, '[::1]:10249');
});

test('an invalid flag value is a usage error naming the flag', async () => {
  const cases: [string[], string][] = [
    [['--iptables-masquerade-bit', '40'], '--iptables-masquerade-bit: 40 is out of range (0-31)'],
    [['--iptables-masquerade-bit', 'x'], '--iptables-masquerade-bit: "x" is not an integer'],
    [['--proxy-mode', 'kernelspace'], '--proxy-mode: "kernelspace" is not one of iptables, nftables, ipvs'],
    [['--node-ip', '10.0.0.1', '--node-ip', 'nope'], '--node-ip: "nope" is not an IP address'],
    [
      ['--iptables-sync-period', '30'],
      '--iptables-sync-period: "30" is not a duration (like 30s, 1m0s, 500ms)',
    ],
    [
      ['--nodeport-addresses', '10.0.0.0/8,bogus'],
      '--nodeport-addresses: "bogus" is not a CIDR, "primary", "localhost" or "all"',
    ],
  ];
  for (const [args, error] of cases)
    assert.deepEqual(await load(args), { ok: false, error, usage: true }, args.join(' '));
});

test('--nodeport-addresses defaults per mode as kube-proxy: primary for nftables, all for iptables and ipvs', async () => {
  assert.deepEqual((await loadOk(['--proxy-mode', 'nftables'])).nodePortAddresses, ['primary']);
  assert.deepEqual((await loadOk(['--proxy-mode', 'iptables'])).nodePortAddresses, []);
  assert.deepEqual((await loadOk(['--proxy-mode', 'ipvs'])).nodePortAddresses, []);
  // Set, it is what it says in every mode; since 1.37 the keywords combine with CIDRs.
  const combined = await loadOk(['--proxy-mode', 'nftables', '--nodeport-addresses', 'primary,10.0.0.0/8']);
  assert.deepEqual(combined.nodePortAddresses, ['primary', '10.0.0.0/8']);
  assert.deepEqual((await loadOk(['--nodeport-addresses', 'all'])).nodePortAddresses, ['all']);
  // kube-proxy 1.37's third keyword (kubernetes#138427): the node's loopback addresses.
  const localhost = await loadOk(['--nodeport-addresses', 'primary,localhost']);
  assert.deepEqual(localhost.nodePortAddresses, ['primary', 'localhost']);
});

test('config file problems are errors (not usage errors) naming the file', async () => {
  assert.deepEqual(await load(['--config', 'missing.yaml']), {
    ok: false,
    error: 'missing.yaml: no such file or directory',
    usage: false,
  });
  assert.deepEqual(
    await load(['--config', 'c.yaml'], { 'c.yaml': `${HEADER}iptables: {masqueradeBit: 32}\n` }),
    {
      ok: false,
      error: 'c.yaml: iptables.masqueradeBit: 32 is out of range (0-31)',
      usage: false,
    },
  );
});

test("a config file's warnings come back with the configuration, for the log at start", async () => {
  const loaded = await load(['--config', 'c.yaml'], {
    'c.yaml': `${HEADER}iptable: {}\nenableProfiling: true\n`,
  });
  assert.ok(loaded.ok);
  assert.deepEqual(loaded.warnings, [
    'c.yaml: using lenient decoding as strict decoding failed: strict decoding error: unknown field "iptable"',
    'c.yaml: enableProfiling: true has no effect: kproxy serves no /debug/pprof',
  ]);
  const flagsOnly = await load(['--hostname-override', 'n1']);
  assert.ok(flagsOnly.ok);
  assert.deepEqual(flagsOnly.warnings, []);
});

test('settings that contradict each other are rejected', async () => {
  const cases: [string[], string][] = [
    [
      ['--cluster-cidr', '10.1.0.0/16,10.2.0.0/16'],
      'clusterCIDR: "10.1.0.0/16,10.2.0.0/16": must be a valid DualStack CIDR (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)',
    ],
    [
      ['--cluster-cidr', '10.1.0.0/16,fd00::/64,10.2.0.0/16'],
      'clusterCIDR: "10.1.0.0/16,fd00::/64,10.2.0.0/16": only one CIDR allowed or a valid DualStack CIDR (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)',
    ],
    [
      ['--detect-local-mode', 'BridgeInterface'],
      'detectLocal.bridgeInterface: required when detectLocalMode is BridgeInterface',
    ],
    [
      ['--detect-local-mode', 'InterfaceNamePrefix'],
      'detectLocal.interfaceNamePrefix: required when detectLocalMode is InterfaceNamePrefix',
    ],
    [
      ['--proxy-mode', 'iptables', '--iptables-sync-period', '1s', '--iptables-min-sync-period', '5s'],
      'iptables.syncPeriod: 1s must be greater than or equal to iptables.minSyncPeriod (5s)',
    ],
  ];
  for (const [args, error] of cases)
    assert.deepEqual(await load(args), { ok: false, error, usage: false }, args.join(' '));
});

test('a broken rule that involves a field of the config file names the file; durations read as Go prints them', async () => {
  const files = {
    'periods.yaml': `${HEADER}mode: nftables\nnftables:\n  syncPeriod: 90s\n  minSyncPeriod: 2m\n`,
    'top-level.yaml': `${HEADER}mode: ipvs\nminSyncPeriod: 1500ms\n`,
    'cidrs.yaml': `${HEADER}clusterCIDR: 10.1.0.0/16,10.2.0.0/16\n`,
  };
  const cases: [string[], string][] = [
    [
      ['--config', 'periods.yaml'],
      'periods.yaml: nftables.syncPeriod: 1m30s must be greater than or equal to nftables.minSyncPeriod (2m0s)',
    ],
    [
      ['--config', 'top-level.yaml', '--ipvs-sync-period', '1s'],
      'top-level.yaml: ipvs.syncPeriod: 1s must be greater than or equal to minSyncPeriod (1.5s)',
    ],
    [
      ['--config', 'cidrs.yaml'],
      'cidrs.yaml: clusterCIDR: "10.1.0.0/16,10.2.0.0/16": must be a valid DualStack CIDR (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)',
    ],
    // The flag overrides the file's value: the file is not to blame.
    [
      ['--config', 'cidrs.yaml', '--cluster-cidr', '10.3.0.0/16,10.4.0.0/16'],
      'clusterCIDR: "10.3.0.0/16,10.4.0.0/16": must be a valid DualStack CIDR (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)',
    ],
  ];
  for (const [args, error] of cases)
    assert.deepEqual(await load(args, files), { ok: false, error, usage: false }, args.join(' '));
});

test('resolveProxyConfig is pure: the hostname is an input', () => {
  const result = resolveProxyConfig(new Map(), 'NODE-9');
  assert.ok(result.ok);
  assert.equal(result.config.nodeName, 'node-9');
  assert.equal(result.config.hostnameOverride, '');
});

test('unknown flags and missing values are reported by parseFlags', () => {
  assert.deepEqual(parseFlags(['--iptables-masq-bit', '3'], PROXY_FLAG_OPTIONS), {
    ok: false,
    error: 'unknown flag: --iptables-masq-bit',
  });
  assert.deepEqual(parseFlags(['--node'], PROXY_FLAG_OPTIONS), {
    ok: false,
    error: 'flag needs an argument: --node',
  });
});

test('each kube-proxy flag lands in its config field', async () => {
  const config = await loadOk([
    '--kubeconfig=/etc/kproxy/kubeconfig',
    '--master=https://10.0.0.1:6443',
    '--hostname-override=Node-3',
    '--pod-bridge-interface=cbr0',
    '--pod-interface-name-prefix=veth',
    '--iptables-localhost-nodeports=false',
    '--ipvs-strict-arp',
    '--ipvs-tcp-timeout=15m',
    '--ipvs-tcpfin-timeout=30s',
    '--ipvs-udp-timeout=5s',
    '--ipvs-min-sync-period=2s',
    '--ipvs-exclude-cidrs=10.0.0.0/8',
    '--conntrack-max-per-core=0',
    '--conntrack-min=1000',
    '--conntrack-tcp-timeout-established=12h',
    '--conntrack-tcp-timeout-close-wait=30m',
    '--conntrack-tcp-be-liberal',
    '--conntrack-udp-timeout=30s',
    '--conntrack-udp-timeout-stream=2m',
    '--kube-api-qps=20',
    '--kube-api-burst=40',
    '--v=4',
  ]);
  assert.equal(config.clientConnection.kubeconfig, '/etc/kproxy/kubeconfig');
  assert.equal(config.master, 'https://10.0.0.1:6443');
  assert.equal(config.nodeName, 'node-3');
  assert.deepEqual(config.detectLocal, { bridgeInterface: 'cbr0', interfaceNamePrefix: 'veth' });
  assert.equal(config.iptables.localhostNodePorts, false);
  assert.deepEqual(config.ipvs, {
    scheduler: 'rr',
    syncPeriodMs: 30_000,
    minSyncPeriodMs: 2000,
    strictARP: true,
    tcpTimeoutMs: 900_000,
    tcpFinTimeoutMs: 30_000,
    udpTimeoutMs: 5000,
    excludeCIDRs: ['10.0.0.0/8'],
  });
  assert.deepEqual(config.conntrack, {
    maxPerCore: 0,
    min: 1000,
    tcpEstablishedTimeoutMs: 43_200_000,
    tcpCloseWaitTimeoutMs: 1_800_000,
    tcpBeLiberal: true,
    udpTimeoutMs: 30_000,
    udpStreamTimeoutMs: 120_000,
  });
  assert.deepEqual(config.clientConnection, { kubeconfig: '/etc/kproxy/kubeconfig', qps: 20, burst: 40 });
  assert.equal(config.logging.verbosity, 4);
});

test('the bundled example config loads for node-1 in nftables mode', async () => {
  const path = new URL('../../examples/kube-proxy-config.yaml', import.meta.url).pathname;
  const config = await loadOk(['--config', path], { [path]: await readFile(path, 'utf8') });
  assert.equal(config.mode, 'nftables');
  assert.equal(config.nodeName, 'node-1');
  assert.deepEqual(config.nodeIPs, ['192.168.10.11', 'fd00:192:168:10::11']);
  assert.deepEqual(config.clusterCIDRs, ['10.244.0.0/16', 'fd00:10:244::/56']);
});

test('an interface name that would break the rules (quote, space, newline, too long) is rejected', async () => {
  for (const name of ['a"b', 'eth 0', 'a\nb', 'x'.repeat(16)]) {
    const flagged = await load([
      '--detect-local-mode',
      'InterfaceNamePrefix',
      '--pod-interface-name-prefix',
      name,
    ]);
    assert.equal(flagged.ok, false, JSON.stringify(name));
    assert.match((flagged as { error: string }).error, /is not a network interface name/);
    const filed = await load(['--config', 'c.yaml'], {
      'c.yaml': `${HEADER}detectLocal: {bridgeInterface: ${JSON.stringify(name)}}\n`,
    });
    assert.match(
      (filed as { error: string }).error,
      /^c\.yaml: detectLocal\.bridgeInterface: .* is not a network interface name/,
    );
  }
  assert.ok((await load(['--pod-bridge-interface', 'cbr0.1_x-y'])).ok);
});
