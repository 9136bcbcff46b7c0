// kube-proxy's command-line flags (same names and meanings), plus kproxy's --node, repeatable
// --node-ip and --service-cluster-ip-range. Each flag sets config field paths, checked like the
// file's fields, or has no effect here and says why (kube-proxy-precedence.ts warns).
import type { ParseArgsOptionsConfig } from 'node:util';
import { proxyNameProblem } from '../model/proxy-labels.ts';
import {
  CONFIG_FIELDS,
  checkCIDR,
  type FieldSpec,
  type FieldValue,
  parseFieldValue,
  show,
} from './config-fields.ts';
import type { Settings, SettingsResult } from './config-file.ts';

/** Parsed command-line flags by name, as node:util parseArgs returns them. */
export type FlagValues = Readonly<Record<string, string | boolean | readonly string[] | undefined>>;

interface ProxyFlag {
  readonly type: 'string' | 'boolean';
  /** pflag's list flags: each use appends. */
  readonly multiple?: boolean;
  /** The config field paths the flag sets. The first one's FieldSpec checks the value, unless `spec`. */
  readonly paths?: readonly string[];
  /**
   * How the flag's value is read when it differs from the file's field: a flag sets kube-proxy's
   * configuration after its defaults, so a zero is a zero there (the file's zero means "default").
   */
  readonly spec?: FieldSpec;
  /** An empty value is the value (`--metrics-bind-address=` turns the server off). */
  readonly emptyIsValue?: boolean;
  /** kube-proxy refuses 0 (its validation: "must be greater than 0"). */
  readonly positive?: boolean;
  /** Accepted with no effect here, and no field of the file to say why: why (a warning at start). */
  readonly ignored?: string;
  /** Still read when --config is given (kube-proxy: the logging flags, --hostname-override, --master). */
  readonly keptWithConfig?: boolean;
  readonly help: string;
}

/** Flags with no config file field: kube-proxy only has them on the command line. */
export const FLAG_ONLY_FIELDS: ReadonlyMap<string, FieldSpec> = new Map<string, FieldSpec>([
  ['master', { type: 'string' }],
  // kproxy's own (kube-proxy reads ServiceCIDR objects only); kube-apiserver's flag name and format.
  ['serviceClusterIPRange', { type: 'list', check: checkCIDR }],
  // kproxy's own: kube-proxy serves only Services without the label.
  ['serviceProxyName', { type: 'string', check: proxyNameProblem }],
]);

const MASQUERADE_ALL = ['masqueradeAll', 'iptables.masqueradeAll', 'nftables.masqueradeAll'];
// A flag's zero is a zero (see ProxyFlag.spec).
const DURATION: FieldSpec = { type: 'duration' };
const KLOG_REMOVED =
  'a klog flag kube-proxy dropped in 1.26 (kube-proxy 1.37 refuses it); kproxy logs to stdout, one line at a time';
const NO_EFFECT = 'accepted; no effect here (a warning says why)';

/**
 * Every flag of kube-proxy's `--help` on Linux, read from kubernetes/kubernetes
 * cmd/kube-proxy/app/options.go at c57e1156 (the newest version found; its release not checked:
 * it has --iptables-localhost-nodeports and processV1Alpha1Flags, so 1.31 or later), component-base's
 * logs/api/v1 flags (-v, --vmodule, --logging-format, --log-*) and --version, plus klog's flags that
 * kube-proxy dropped in 1.26 and kproxy's own --node, --node-ip and --service-cluster-ip-range.
 * A flag without `paths` or `ignored` is acted on by `kproxy run` itself.
 */
export const PROXY_FLAGS: Readonly<Record<string, ProxyFlag>> = {
  config: {
    type: 'string',
    help: 'KubeProxyConfiguration file; with it, kube-proxy reads no other flag (see below)',
  },
  'write-config-to': {
    type: 'string',
    keptWithConfig: true,
    help: 'write the effective configuration to this file as YAML and exit',
  },
  cleanup: { type: 'boolean', keptWithConfig: true, help: "remove kproxy's and kube-proxy's rules and exit" },
  'init-only': {
    type: 'boolean',
    keptWithConfig: true,
    help: 'set the sysctls that need full root privileges and exit',
  },
  version: { type: 'boolean', keptWithConfig: true, help: 'print the version and exit' },
  kubeconfig: {
    type: 'string',
    paths: ['clientConnection.kubeconfig'],
    help: 'kubeconfig file of the API server',
  },
  master: {
    type: 'string',
    paths: ['master'],
    keptWithConfig: true,
    help: 'API server address (overrides the kubeconfig)',
  },
  'proxy-mode': { type: 'string', paths: ['mode'], help: 'iptables, nftables or ipvs (unset: see README)' },
  'hostname-override': {
    type: 'string',
    paths: ['hostnameOverride'],
    keptWithConfig: true,
    help: "this node's name (overrides the file's hostnameOverride)",
  },
  node: {
    type: 'string',
    paths: ['hostnameOverride'],
    keptWithConfig: true,
    help: 'alias of --hostname-override',
  },
  'node-ip': {
    type: 'string',
    multiple: true,
    paths: ['nodeIPs'],
    keptWithConfig: true,
    help: "kproxy's own: this node's IP (repeatable)",
  },
  'bind-address': { type: 'string', paths: ['bindAddress'], help: 'node IP unless 0.0.0.0 or ::' },
  'cluster-cidr': { type: 'string', paths: ['clusterCIDR'], help: 'pod CIDRs, comma-separated' },
  'service-cluster-ip-range': {
    type: 'string',
    paths: ['serviceClusterIPRange'],
    keptWithConfig: true,
    help: "kproxy's own: service CIDRs, comma-separated, for a cluster without ServiceCIDR objects (nftables drops their unallocated IPs)",
  },
  'service-proxy-name': {
    type: 'string',
    paths: ['serviceProxyName'],
    keptWithConfig: true,
    help: "kproxy's own: serve only the Services labelled service.kubernetes.io/service-proxy-name=NAME (beside kube-proxy, which serves the unlabelled ones), and those labelled kproxy/handover=NAME while they move (README)",
  },
  'detect-local-mode': {
    type: 'string',
    paths: ['detectLocalMode'],
    help: 'ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix',
  },
  'pod-bridge-interface': {
    type: 'string',
    paths: ['detectLocal.bridgeInterface'],
    help: 'for BridgeInterface',
  },
  'pod-interface-name-prefix': {
    type: 'string',
    paths: ['detectLocal.interfaceNamePrefix'],
    help: 'for InterfaceNamePrefix',
  },
  'masquerade-all': { type: 'boolean', paths: MASQUERADE_ALL, help: 'SNAT all traffic sent to service IPs' },
  'iptables-masquerade-bit': {
    type: 'string',
    paths: ['iptables.masqueradeBit', 'nftables.masqueradeBit'],
    help: 'mark bit that asks for SNAT (0-31, default 14)',
  },
  'iptables-sync-period': {
    type: 'string',
    paths: ['iptables.syncPeriod', 'nftables.syncPeriod'],
    spec: DURATION,
    positive: true,
    help: 'full resync period, iptables and nftables modes (default 30s; must be greater than 0)',
  },
  'iptables-min-sync-period': {
    type: 'string',
    paths: ['iptables.minSyncPeriod', 'nftables.minSyncPeriod'],
    spec: DURATION,
    help: 'minimum time between syncs (default 1s; 0: sync on every change)',
  },
  'iptables-localhost-nodeports': {
    type: 'boolean',
    paths: ['iptables.localhostNodePorts'],
    help: 'iptables mode, IPv4: NodePorts also on 127.0.0.1 if --nodeport-addresses covers it (route_localnet; default true)',
  },
  'full-sync-period': {
    type: 'string',
    paths: ['fullSyncPeriod'],
    help: "kproxy's own: force a full sync this often (default 1h, 0 = never)",
  },
  'nodeport-addresses': {
    type: 'string',
    multiple: true,
    paths: ['nodePortAddresses'],
    help: 'CIDRs and/or "primary", "localhost", "all" (comma-separated; default primary in nftables mode, all otherwise)',
  },
  'healthz-bind-address': {
    type: 'string',
    paths: ['healthzBindAddress'],
    emptyIsValue: true,
    help: 'default 0.0.0.0:10256; empty: no health server',
  },
  'metrics-bind-address': {
    type: 'string',
    paths: ['metricsBindAddress'],
    emptyIsValue: true,
    help: 'default 127.0.0.1:10249; empty: no metrics server',
  },
  'healthz-port': {
    type: 'string',
    help: 'deprecated: 0 turns the health server off; else the port of a bare --healthz-bind-address IP',
  },
  'metrics-port': {
    type: 'string',
    help: 'deprecated: 0 turns the metrics server off; else the port of a bare --metrics-bind-address IP',
  },
  'ipvs-scheduler': { type: 'string', paths: ['ipvs.scheduler'], help: 'rr, wrr, lc, ... (default rr)' },
  'ipvs-sync-period': {
    type: 'string',
    paths: ['ipvs.syncPeriod'],
    spec: DURATION,
    positive: true,
    help: 'default 30s; must be greater than 0',
  },
  'ipvs-min-sync-period': {
    type: 'string',
    paths: ['ipvs.minSyncPeriod'],
    spec: DURATION,
    help: 'default 0s',
  },
  'ipvs-strict-arp': { type: 'boolean', paths: ['ipvs.strictARP'], help: 'arp_ignore/arp_announce' },
  'ipvs-tcp-timeout': {
    type: 'string',
    paths: ['ipvs.tcpTimeout'],
    help: 'idle TCP timeout (0: leave as is)',
  },
  'ipvs-tcpfin-timeout': {
    type: 'string',
    paths: ['ipvs.tcpFinTimeout'],
    help: 'TCP FIN timeout (0: leave as is)',
  },
  'ipvs-udp-timeout': { type: 'string', paths: ['ipvs.udpTimeout'], help: 'UDP timeout (0: leave as is)' },
  'ipvs-exclude-cidrs': {
    type: 'string',
    multiple: true,
    paths: ['ipvs.excludeCIDRs'],
    help: 'CIDRs IPVS leaves alone',
  },
  'conntrack-max-per-core': {
    type: 'string',
    paths: ['conntrack.maxPerCore'],
    help: 'default 32768 (0: leave as is)',
  },
  'conntrack-min': { type: 'string', paths: ['conntrack.min'], help: 'default 131072' },
  'conntrack-tcp-timeout-established': {
    type: 'string',
    paths: ['conntrack.tcpEstablishedTimeout'],
    help: 'default 24h0m0s (0: leave as is)',
  },
  'conntrack-tcp-timeout-close-wait': {
    type: 'string',
    paths: ['conntrack.tcpCloseWaitTimeout'],
    help: 'default 1h0m0s',
  },
  'conntrack-tcp-be-liberal': {
    type: 'boolean',
    paths: ['conntrack.tcpBeLiberal'],
    help: 'nf_conntrack_tcp_be_liberal',
  },
  'conntrack-udp-timeout': { type: 'string', paths: ['conntrack.udpTimeout'], help: '0 = leave as is' },
  'conntrack-udp-timeout-stream': {
    type: 'string',
    paths: ['conntrack.udpStreamTimeout'],
    help: '0 = leave as is',
  },
  'kube-api-qps': { type: 'string', paths: ['clientConnection.qps'], help: 'default 5' },
  'kube-api-burst': { type: 'string', paths: ['clientConnection.burst'], help: 'default 10' },
  v: {
    type: 'string',
    paths: ['logging.verbosity'],
    keptWithConfig: true,
    help: 'log verbosity (-v 2, -v=2, --v=2)',
  },
  // Bound to fields of the file: a flag does what its field does, and config-fields.ts says why when
  // that is nothing here (kube-proxy-precedence.ts warns with it).
  'oom-score-adj': {
    type: 'string',
    paths: ['oomScoreAdj'],
    help: 'OOM score of the process (-1000 to 1000, default -999)',
  },
  'logging-format': {
    type: 'string',
    paths: ['logging.format'],
    keptWithConfig: true,
    help: 'text (the default) or json',
  },
  'feature-gates': { type: 'string', multiple: true, paths: ['featureGates'], help: NO_EFFECT },
  'kube-api-content-type': { type: 'string', paths: ['clientConnection.contentType'], help: NO_EFFECT },
  'bind-address-hard-fail': { type: 'boolean', paths: ['bindAddressHardFail'], help: 'always true here' },
  profiling: { type: 'boolean', paths: ['enableProfiling'], help: NO_EFFECT },
  'show-hidden-metrics-for-version': {
    type: 'string',
    paths: ['showHiddenMetricsForVersion'],
    help: NO_EFFECT,
  },
  'config-sync-period': { type: 'string', paths: ['configSyncPeriod'], help: NO_EFFECT },
  'proxy-port-range': { type: 'string', paths: ['portRange'], help: NO_EFFECT },
  'log-flush-frequency': {
    type: 'string',
    paths: ['logging.flushFrequency'],
    keptWithConfig: true,
    help: NO_EFFECT,
  },
  vmodule: {
    type: 'string',
    multiple: true,
    paths: ['logging.vmodule'],
    keptWithConfig: true,
    help: NO_EFFECT,
  },
  ...Object.fromEntries(
    ['log-json-split-stream', 'log-text-split-stream'].map((name) => [
      name,
      { type: 'boolean', paths: ['logging.options'], keptWithConfig: true, help: NO_EFFECT },
    ]),
  ),
  ...Object.fromEntries(
    ['log-json-info-buffer-size', 'log-text-info-buffer-size'].map((name) => [
      name,
      { type: 'string', paths: ['logging.options'], keptWithConfig: true, help: NO_EFFECT },
    ]),
  ),
  // No field: klog's own flags, gone from kube-proxy.
  ...Object.fromEntries(
    [
      'add-dir-header',
      'alsologtostderr',
      'logtostderr',
      'one-output',
      'skip-headers',
      'skip-log-headers',
    ].map((name) => [
      name,
      { type: 'boolean', keptWithConfig: true, ignored: KLOG_REMOVED, help: NO_EFFECT },
    ]),
  ),
  ...Object.fromEntries(
    ['log-backtrace-at', 'log-dir', 'log-file', 'log-file-max-size', 'stderrthreshold'].map((name) => [
      name,
      { type: 'string', keptWithConfig: true, ignored: KLOG_REMOVED, help: NO_EFFECT },
    ]),
  ),
};

/** Flags only `kproxy run` reads: what it does instead of running, and the deprecated ports. */
export const RUN_ONLY_FLAGS: ReadonlySet<string> = new Set([
  'write-config-to',
  'cleanup',
  'init-only',
  'version',
  'healthz-port',
  'metrics-port',
]);

/** The parseArgs-shaped options of these proxy flags; a one-letter flag is its own shorthand (-v). */
export function proxyFlagOptions(names: readonly string[]): ParseArgsOptionsConfig {
  return Object.fromEntries(
    names.map((name) => {
      const flag = PROXY_FLAGS[name]!;
      return [
        name,
        { type: flag.type, multiple: flag.multiple ?? false, ...(name.length === 1 ? { short: name } : {}) },
      ];
    }),
  );
}

/** The options of render and trace: the flags that make a configuration. */
export const PROXY_FLAG_OPTIONS = proxyFlagOptions(
  Object.keys(PROXY_FLAGS).filter((name) => !RUN_ONLY_FLAGS.has(name)),
);

/** The settings the given flags make. Flags not given, and flags without effect, set nothing. */
export function flagSettings(values: FlagValues): SettingsResult {
  const settings = new Map<string, FieldValue>();
  for (const [name, flag] of Object.entries(PROXY_FLAGS)) {
    const raw = values[name];
    if (raw === undefined || flag.paths === undefined) continue;
    const text = Array.isArray(raw) ? raw.join(',') : raw;
    let value: FieldValue | undefined;
    if (text === '' && flag.emptyIsValue) {
      value = '';
    } else {
      const path = flag.paths[0]!;
      const spec = flag.spec ?? CONFIG_FIELDS.get(path) ?? FLAG_ONLY_FIELDS.get(path)!;
      const parsed = parseFieldValue(spec, text);
      if (!parsed.ok) return { ok: false, error: `--${name}: ${parsed.reason}` };
      if (flag.positive && parsed.value === 0) {
        return { ok: false, error: `--${name}: ${show(text)} must be greater than 0` };
      }
      value = parsed.value;
    }
    if (value === undefined) continue;
    for (const target of flag.paths) settings.set(target, value);
  }
  return { ok: true, settings };
}

/** Settings of `over` win over those of `base`. */
export function overlaySettings(base: Settings, over: Settings): Settings {
  return new Map([...base, ...over]);
}
