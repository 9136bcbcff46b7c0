// The one validated, fully defaulted configuration of a kproxy process: the config file's
// settings, overridden by flags, with kube-proxy's defaults for everything left unset.
import { canonicalCIDR, canonicalIP, familyOf } from '../../contract/base/ip-address.ts';
import type { DetectLocalMode } from '../model/node-settings.ts';
import { fileErrorReason } from '../sources/input-files.ts';
import { type FieldValue, type IPVS_SCHEDULERS, type PROXY_MODES, show } from './config-fields.ts';
import { parseConfigFile, type Settings } from './config-file.ts';
import { formatGoDuration } from './go-duration.ts';
import type { FlagValues } from './proxy-flags.ts';
import { flagSettings, overlaySettings } from './proxy-flags.ts';

export type ProxyMode = (typeof PROXY_MODES)[number];
export type IpvsScheduler = (typeof IPVS_SCHEDULERS)[number];

/** Per-mode settings of the iptables and nftables sections. Durations in milliseconds. */
export interface RuleModeConfig {
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  readonly syncPeriodMs: number;
  readonly minSyncPeriodMs: number;
}

export interface IptablesConfig extends RuleModeConfig {
  /** NodePorts on 127.0.0.1 (IPv4, route_localnet); kube-proxy's nftables section has no such field. */
  readonly localhostNodePorts: boolean;
}

export interface IpvsConfig {
  readonly scheduler: IpvsScheduler;
  readonly syncPeriodMs: number;
  readonly minSyncPeriodMs: number;
  readonly strictARP: boolean;
  /** 0 = leave the kernel's timeout as it is. */
  readonly tcpTimeoutMs: number;
  readonly tcpFinTimeoutMs: number;
  readonly udpTimeoutMs: number;
  readonly excludeCIDRs: readonly string[];
}

export interface ConntrackConfig {
  /** 0 = leave nf_conntrack_max as it is. */
  readonly maxPerCore: number;
  readonly min: number;
  /** 0 = leave the sysctl as it is (for every conntrack timeout). */
  readonly tcpEstablishedTimeoutMs: number;
  readonly tcpCloseWaitTimeoutMs: number;
  readonly tcpBeLiberal: boolean;
  readonly udpTimeoutMs: number;
  readonly udpStreamTimeoutMs: number;
}

export interface ProxyConfig {
  readonly mode: ProxyMode;
  /** Neither the file nor a flag set the mode: kproxy's default (README: "The default mode"). */
  readonly modeDefaulted: boolean;
  /** hostnameOverride as given ("" when unset); see nodeName for the effective name. */
  readonly hostnameOverride: string;
  /** This node's name: hostnameOverride, else the machine's hostname, lower-cased as kube-proxy does. */
  readonly nodeName: string;
  /** From nodeIPs/--node-ip, else a specific bindAddress; empty = take them from the Node object. */
  readonly nodeIPs: readonly string[];
  readonly bindAddress: string;
  readonly healthzBindAddress: string;
  readonly metricsBindAddress: string;
  readonly clusterCIDRs: readonly string[];
  /** --service-cluster-ip-range: the service CIDRs when the cluster has no ServiceCIDR object. */
  readonly serviceCIDRs: readonly string[];
  /** --service-proxy-name: serve only the Services labelled with it; "" = kube-proxy's selection. */
  readonly serviceProxyName: string;
  readonly detectLocalMode: DetectLocalMode;
  readonly detectLocal: { readonly bridgeInterface: string; readonly interfaceNamePrefix: string };
  /** CIDRs, or ["primary"]; empty = every local address. */
  readonly nodePortAddresses: readonly string[];
  // The effective values for `mode` (ipvs takes its masquerade settings from the iptables section).
  readonly masqueradeAll: boolean;
  readonly masqueradeBit: number;
  readonly syncPeriodMs: number;
  readonly minSyncPeriodMs: number;
  /** A full sync at least this often, whatever the canary says (kube-proxy: hourly); 0 = never. */
  readonly fullSyncPeriodMs: number;
  readonly iptables: IptablesConfig;
  readonly nftables: RuleModeConfig;
  readonly ipvs: IpvsConfig;
  readonly conntrack: ConntrackConfig;
  readonly clientConnection: { readonly kubeconfig: string; readonly qps: number; readonly burst: number };
  /** --master: the API server URL, overriding the kubeconfig's; "" when unset. */
  readonly master: string;
  readonly logging: { readonly verbosity: number; readonly format: 'text' | 'json' };
  /** The process's /proc/self/oom_score_adj (kube-proxy's default -999). */
  readonly oomScoreAdj: number;
}

export type ProxyConfigResult =
  /** `warnings`: for the log at start (fields the config file sets that do nothing here, lenient decoding). */
  | { readonly ok: true; readonly config: ProxyConfig; readonly warnings: readonly string[] }
  /** `usage`: the command line is wrong (exit 2); otherwise the config file or a combination (exit 1). */
  | { readonly ok: false; readonly error: string; readonly usage: boolean };

export interface ConfigEnvironment {
  readFile(path: string): Promise<string>;
  /** The machine's hostname, the node name when none is configured. */
  readonly hostname: string;
}

/** A bind address that means "every address", not a node IP. */
const UNSPECIFIED_IPS = new Set(['0.0.0.0', '::']);
const HEALTHZ_PORT = 10256;
const METRICS_PORT = 10249;
const SECOND = 1000;
const HOUR = 3600 * SECOND;

/** --config FILE (if given) overridden by the other proxy flags, defaulted and validated. */
export async function loadProxyConfig(
  values: FlagValues,
  env: ConfigEnvironment,
): Promise<ProxyConfigResult> {
  const flags = flagSettings(values);
  if (!flags.ok) return { ...flags, usage: true };
  let fileSettings: Settings = new Map();
  let warnings: readonly string[] = [];
  const file = values.config;
  if (typeof file === 'string') {
    let text: string;
    try {
      text = await env.readFile(file);
    } catch (error) {
      return { ok: false, error: `${file}: ${fileErrorReason(error)}`, usage: false };
    }
    const parsed = parseConfigFile(text, file);
    if (!parsed.ok) return { ...parsed, usage: false };
    fileSettings = parsed.settings;
    warnings = parsed.warnings;
  }
  const resolved = resolveProxyConfig(overlaySettings(fileSettings, flags.settings), env.hostname);
  if (resolved.ok) return { ...resolved, warnings };
  // A rule that involves a field the file set names the file, as the file's own errors do.
  const fromFile =
    typeof file === 'string' &&
    resolved.error.paths.some((path) => fileSettings.has(path) && !flags.settings.has(path));
  return { ok: false, error: `${fromFile ? `${file}: ` : ''}${resolved.error.message}`, usage: false };
}

/** A rule no single field can check was broken: the message, and the field paths involved. */
export interface CrossFieldError {
  readonly paths: readonly string[];
  readonly message: string;
}

/** Fills in kube-proxy's defaults (except the mode: kproxy's default is its nftables dataplane) and checks what no single field can check alone. */
export function resolveProxyConfig(
  settings: Settings,
  hostname: string,
):
  | { readonly ok: true; readonly config: ProxyConfig }
  | { readonly ok: false; readonly error: CrossFieldError } {
  const get = settingReader(settings);
  const mode = get.string('mode', 'nftables') as ProxyMode;
  const bindAddress = canonicalIP(get.string('bindAddress', '0.0.0.0'))!;
  const ipv6Bind = familyOf(bindAddress) === 'IPv6';
  const ruleMode = (section: 'iptables' | 'nftables'): RuleModeConfig => ({
    masqueradeAll: get.boolean(`${section}.masqueradeAll`, get.boolean('masqueradeAll', false)),
    masqueradeBit: get.number(`${section}.masqueradeBit`, 14),
    syncPeriodMs: get.number(`${section}.syncPeriod`, get.number('syncPeriod', 30 * SECOND)),
    minSyncPeriodMs: get.number(`${section}.minSyncPeriod`, get.number('minSyncPeriod', SECOND)),
  });
  const iptables: IptablesConfig = {
    ...ruleMode('iptables'),
    localhostNodePorts: get.boolean('iptables.localhostNodePorts', true),
  };
  const nftables = ruleMode('nftables');
  const ipvs: IpvsConfig = {
    scheduler: get.string('ipvs.scheduler', 'rr') as IpvsScheduler,
    syncPeriodMs: get.number('ipvs.syncPeriod', get.number('syncPeriod', 30 * SECOND)),
    minSyncPeriodMs: get.number('ipvs.minSyncPeriod', get.number('minSyncPeriod', 0)),
    strictARP: get.boolean('ipvs.strictARP', false),
    tcpTimeoutMs: get.number('ipvs.tcpTimeout', 0),
    tcpFinTimeoutMs: get.number('ipvs.tcpFinTimeout', 0),
    udpTimeoutMs: get.number('ipvs.udpTimeout', 0),
    excludeCIDRs: get.list('ipvs.excludeCIDRs').map((cidr) => canonicalCIDR(cidr)!),
  };
  const active = mode === 'ipvs' ? { ...iptables, ...ipvs } : mode === 'nftables' ? nftables : iptables;
  const hostnameOverride = get.string('hostnameOverride', '').trim();
  const config: ProxyConfig = {
    mode,
    modeDefaulted: !settings.has('mode'),
    hostnameOverride,
    nodeName: (hostnameOverride || hostname).trim().toLowerCase(),
    nodeIPs: get
      .list('nodeIPs', UNSPECIFIED_IPS.has(bindAddress) ? [] : [bindAddress])
      .map((ip) => canonicalIP(ip)!),
    bindAddress,
    healthzBindAddress: withPort(
      get.string('healthzBindAddress', ipv6Bind ? '[::]' : '0.0.0.0'),
      HEALTHZ_PORT,
    ),
    metricsBindAddress: withPort(
      get.string('metricsBindAddress', ipv6Bind ? '[::1]' : '127.0.0.1'),
      METRICS_PORT,
    ),
    clusterCIDRs: get.list('clusterCIDR').map((cidr) => canonicalCIDR(cidr)!),
    serviceCIDRs: get.list('serviceClusterIPRange').map((cidr) => canonicalCIDR(cidr)!),
    serviceProxyName: get.string('serviceProxyName', ''),
    detectLocalMode: get.string('detectLocalMode', 'ClusterCIDR') as DetectLocalMode,
    detectLocal: {
      bridgeInterface: get.string('detectLocal.bridgeInterface', ''),
      interfaceNamePrefix: get.string('detectLocal.interfaceNamePrefix', ''),
    },
    // kube-proxy's per-mode default: nftables serves node ports on the primary node IPs only.
    nodePortAddresses: get.list('nodePortAddresses', mode === 'nftables' ? ['primary'] : []),
    masqueradeAll: active.masqueradeAll,
    masqueradeBit: active.masqueradeBit,
    syncPeriodMs: active.syncPeriodMs,
    minSyncPeriodMs: active.minSyncPeriodMs,
    fullSyncPeriodMs: get.number('fullSyncPeriod', HOUR),
    iptables,
    nftables,
    ipvs,
    conntrack: {
      maxPerCore: get.number('conntrack.maxPerCore', 32 * 1024),
      min: get.number('conntrack.min', 128 * 1024),
      tcpEstablishedTimeoutMs: get.number('conntrack.tcpEstablishedTimeout', 24 * HOUR),
      tcpCloseWaitTimeoutMs: get.number('conntrack.tcpCloseWaitTimeout', HOUR),
      tcpBeLiberal: get.boolean('conntrack.tcpBeLiberal', false),
      udpTimeoutMs: get.number('conntrack.udpTimeout', 0),
      udpStreamTimeoutMs: get.number('conntrack.udpStreamTimeout', 0),
    },
    clientConnection: {
      kubeconfig: get.string('clientConnection.kubeconfig', ''),
      qps: get.number('clientConnection.qps', 5),
      burst: get.number('clientConnection.burst', 10),
    },
    master: get.string('master', ''),
    logging: {
      verbosity: get.number('logging.verbosity', 0),
      format: get.string('logging.format', 'text') as 'text' | 'json',
    },
    oomScoreAdj: get.number('oomScoreAdj', -999),
  };
  const error = crossFieldError(config, settings);
  return error === undefined ? { ok: true, config } : { ok: false, error };
}

/** kube-proxy's validation rules that involve more than one field, in its words where it has them. */
function crossFieldError(config: ProxyConfig, settings: Settings): CrossFieldError | undefined {
  if (config.nodeName === '') {
    return {
      paths: ['hostnameOverride'],
      message: 'hostnameOverride: no node name (set it or --hostname-override)',
    };
  }
  const cidrs = config.clusterCIDRs;
  if (cidrs.length > 2 || (cidrs.length === 2 && familyOf(cidrs[0]!) === familyOf(cidrs[1]!))) {
    const written = show(cidrs.join(','));
    return {
      paths: ['clusterCIDR'],
      message: `clusterCIDR: ${written}: ${cidrs.length > 2 ? 'only one CIDR allowed or a valid DualStack CIDR' : 'must be a valid DualStack CIDR'} (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)`,
    };
  }
  for (const [mode, field] of [
    ['BridgeInterface', 'bridgeInterface'],
    ['InterfaceNamePrefix', 'interfaceNamePrefix'],
  ] as const) {
    if (config.detectLocalMode === mode && config.detectLocal[field] === '') {
      return {
        paths: ['detectLocalMode'],
        message: `detectLocal.${field}: required when detectLocalMode is ${mode}`,
      };
    }
  }
  if (config.minSyncPeriodMs > config.syncPeriodMs) {
    // The section's own value, else the top-level one it fell back to (as resolveProxyConfig reads them).
    const section = config.mode === 'ipvs' ? 'ipvs' : config.mode;
    const pathOf = (name: string) => (settings.has(`${section}.${name}`) ? `${section}.${name}` : name);
    const [sync, minSync] = [pathOf('syncPeriod'), pathOf('minSyncPeriod')];
    return {
      paths: [sync, minSync],
      message: `${sync}: ${formatGoDuration(config.syncPeriodMs)} must be greater than or equal to ${minSync} (${formatGoDuration(config.minSyncPeriodMs)})`,
    };
  }
  return undefined;
}

/** kube-proxy's AppendPortIfNeeded: a bare IP gets the default port. */
function withPort(address: string, port: number): string {
  const ip = canonicalIP(address);
  if (ip !== undefined) return familyOf(ip) === 'IPv6' ? `[${ip}]:${port}` : `${ip}:${port}`;
  if (/^\[[^\]]*\]$/.test(address)) return `${address}:${port}`;
  return address;
}

/** Typed reads of validated settings; the FieldSpec of each path guarantees the value's type. */
function settingReader(settings: Settings) {
  const read = <T extends FieldValue>(path: string, fallback: T): T =>
    (settings.get(path) as T | undefined) ?? fallback;
  return {
    string: (path: string, fallback: string) => read(path, fallback),
    number: (path: string, fallback: number) => read(path, fallback),
    boolean: (path: string, fallback: boolean) => read(path, fallback),
    list: (path: string, fallback: readonly string[] = []) => read(path, fallback),
  };
}
