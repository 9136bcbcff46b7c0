// kube-proxy's command-line flags (same names and meanings), plus kproxy's --node and repeatable
// --node-ip. Each flag sets one or more config field paths, checked like the config file's fields.
import type { ParseArgsOptionsConfig } from 'node:util';
import {
  CONFIG_FIELDS,
  checkCIDR,
  type FieldSpec,
  type FieldValue,
  parseFieldValue,
} from './config-fields.ts';
import type { Settings, SettingsResult } from './config-file.ts';

/** Parsed command-line flags by name, as node:util parseArgs returns them. */
export type FlagValues = Readonly<Record<string, string | boolean | readonly string[] | undefined>>;

interface ProxyFlag {
  readonly type: 'string' | 'boolean';
  readonly multiple?: boolean;
  /** The config field paths the flag sets. The first one's FieldSpec checks the value. */
  readonly paths: readonly string[];
  readonly help: string;
}

/** Flags with no config file field: kube-proxy only has them on the command line. */
export const FLAG_ONLY_FIELDS: ReadonlyMap<string, FieldSpec> = new Map<string, FieldSpec>([
  ['master', { type: 'string' }],
  // kproxy's own (kube-proxy reads ServiceCIDR objects only); kube-apiserver's flag name and format.
  ['serviceClusterIPRange', { type: 'list', check: checkCIDR }],
]);

const MASQUERADE_ALL = ['masqueradeAll', 'iptables.masqueradeAll', 'nftables.masqueradeAll'];

export const PROXY_FLAGS: Readonly<Record<string, ProxyFlag>> = {
  kubeconfig: {
    type: 'string',
    paths: ['clientConnection.kubeconfig'],
    help: 'kubeconfig file of the API server',
  },
  master: { type: 'string', paths: ['master'], help: 'API server address (overrides the kubeconfig)' },
  'proxy-mode': { type: 'string', paths: ['mode'], help: 'iptables, nftables or ipvs' },
  'hostname-override': { type: 'string', paths: ['hostnameOverride'], help: "this node's name" },
  node: { type: 'string', paths: ['hostnameOverride'], help: 'alias of --hostname-override' },
  'node-ip': { type: 'string', multiple: true, paths: ['nodeIPs'], help: "this node's IP (repeatable)" },
  'bind-address': { type: 'string', paths: ['bindAddress'], help: 'node IP unless 0.0.0.0 or ::' },
  'cluster-cidr': { type: 'string', paths: ['clusterCIDR'], help: 'pod CIDRs, comma-separated' },
  'service-cluster-ip-range': {
    type: 'string',
    paths: ['serviceClusterIPRange'],
    help: 'service CIDRs, comma-separated, for a cluster without ServiceCIDR objects (nftables drops their unallocated IPs)',
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
    help: 'full resync period (default 30s)',
  },
  'iptables-min-sync-period': {
    type: 'string',
    paths: ['iptables.minSyncPeriod', 'nftables.minSyncPeriod'],
    help: 'minimum time between syncs (default 1s)',
  },
  'iptables-localhost-nodeports': {
    type: 'boolean',
    paths: ['iptables.localhostNodePorts'],
    help: 'iptables mode, IPv4: NodePorts also on 127.0.0.1 if --nodeport-addresses covers it (route_localnet; default true)',
  },
  'full-sync-period': {
    type: 'string',
    paths: ['fullSyncPeriod'],
    help: 'force a full sync this often (default 1h, 0 = never)',
  },
  'nodeport-addresses': {
    type: 'string',
    paths: ['nodePortAddresses'],
    help: 'CIDRs and/or "primary", "localhost", "all" (comma-separated; default primary in nftables mode, all otherwise)',
  },
  'healthz-bind-address': { type: 'string', paths: ['healthzBindAddress'], help: 'default 0.0.0.0:10256' },
  'metrics-bind-address': { type: 'string', paths: ['metricsBindAddress'], help: 'default 127.0.0.1:10249' },
  'ipvs-scheduler': { type: 'string', paths: ['ipvs.scheduler'], help: 'rr, wrr, lc, ... (default rr)' },
  'ipvs-sync-period': { type: 'string', paths: ['ipvs.syncPeriod'], help: 'default 30s' },
  'ipvs-min-sync-period': { type: 'string', paths: ['ipvs.minSyncPeriod'], help: 'default 0s' },
  'ipvs-strict-arp': { type: 'boolean', paths: ['ipvs.strictARP'], help: 'arp_ignore/arp_announce' },
  'ipvs-tcp-timeout': { type: 'string', paths: ['ipvs.tcpTimeout'], help: 'idle TCP timeout' },
  'ipvs-tcpfin-timeout': { type: 'string', paths: ['ipvs.tcpFinTimeout'], help: 'TCP FIN timeout' },
  'ipvs-udp-timeout': { type: 'string', paths: ['ipvs.udpTimeout'], help: 'UDP timeout' },
  'ipvs-exclude-cidrs': { type: 'string', paths: ['ipvs.excludeCIDRs'], help: 'CIDRs IPVS leaves alone' },
  'conntrack-max-per-core': { type: 'string', paths: ['conntrack.maxPerCore'], help: 'default 32768' },
  'conntrack-min': { type: 'string', paths: ['conntrack.min'], help: 'default 131072' },
  'conntrack-tcp-timeout-established': {
    type: 'string',
    paths: ['conntrack.tcpEstablishedTimeout'],
    help: 'default 24h0m0s',
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
  v: { type: 'string', paths: ['logging.verbosity'], help: 'log verbosity' },
};

/** The parseArgs options for the proxy flags and --config. */
export const PROXY_FLAG_OPTIONS: ParseArgsOptionsConfig = {
  config: { type: 'string' },
  ...Object.fromEntries(
    Object.entries(PROXY_FLAGS).map(([name, flag]) => [
      name,
      { type: flag.type, multiple: flag.multiple ?? false },
    ]),
  ),
};

/** The settings the given flags make. Flags not given set nothing. */
export function flagSettings(values: FlagValues): SettingsResult {
  const settings = new Map<string, FieldValue>();
  for (const [name, flag] of Object.entries(PROXY_FLAGS)) {
    const raw = values[name];
    if (raw === undefined) continue;
    const path = flag.paths[0]!;
    const spec = CONFIG_FIELDS.get(path) ?? FLAG_ONLY_FIELDS.get(path)!;
    const parsed = parseFieldValue(spec, Array.isArray(raw) ? raw.join(',') : raw);
    if (!parsed.ok) return { ok: false, error: `--${name}: ${parsed.reason}` };
    if (parsed.value === undefined) continue;
    for (const target of flag.paths) settings.set(target, parsed.value);
  }
  return { ok: true, settings };
}

/** Settings of `over` win over those of `base`. */
export function overlaySettings(base: Settings, over: Settings): Settings {
  return new Map([...base, ...over]);
}
