// The fields of a KubeProxyConfiguration that kproxy understands, keyed by their dotted path
// ("iptables.masqueradeBit"), and how one raw value of each is checked. The config file and the
// command-line flags both go through here, so a value means the same wherever it comes from.

import { canonicalCIDR, canonicalIP } from '../../contract/base/ip-address.ts';
import type { DetectLocalMode } from '../model/node-settings.ts';
import { parseGoDuration } from './go-duration.ts';
import { MAX_PORT, splitHostPort } from './host-port.ts';

export type FieldValue = string | number | boolean | readonly string[];

export type FieldSpec =
  | { readonly type: 'string'; readonly oneOf?: readonly string[]; readonly check?: ItemCheck }
  | { readonly type: 'boolean' }
  | { readonly type: 'integer'; readonly min: number; readonly max: number; readonly zeroIsUnset?: boolean }
  | { readonly type: 'number'; readonly min: number; readonly zeroIsUnset?: boolean }
  | { readonly type: 'duration'; readonly zeroIsUnset?: boolean }
  | { readonly type: 'list'; readonly check: ItemCheck }
  /**
   * A kube-proxy field that does nothing here: any value loads, and one set to something that
   * matters (by default: not null, "", false, 0, "0s", {} or []) gets a warning saying `why`.
   */
  | {
      readonly type: 'inert';
      readonly why: string;
      readonly matters?: (raw: unknown) => boolean;
      /** The type kube-proxy decodes the value into: a value of another type is refused, as there. */
      readonly shape?: CheckedSpec;
    };

/** A field spec whose values are checked (every kind but 'inert'). */
export type CheckedSpec = Exclude<FieldSpec, { readonly type: 'inert' }>;

/** A reason when `item` is not acceptable. */
type ItemCheck = (item: string) => string | undefined;

/** The value, `undefined` when the field is left unset (null, "", or a zero that means "default"), or a reason. */
export type FieldParse =
  | { readonly ok: true; readonly value: FieldValue | undefined }
  | { readonly ok: false; readonly reason: string };

const INT32_MAX = 2 ** 31 - 1;
const duration = { type: 'duration' } as const;
const periodDuration = { type: 'duration', zeroIsUnset: true } as const;
const boolean = { type: 'boolean' } as const;
const string = { type: 'string' } as const;
const inert = (why: string, shape?: CheckedSpec): FieldSpec => ({
  type: 'inert',
  why,
  ...(shape ? { shape } : {}),
});
const WINDOWS_ONLY = 'Windows-only (kube-proxy on Windows)';
const WINKERNEL = `${WINDOWS_ONLY}: the winkernel proxy's HNS settings`;

export const checkCIDR: ItemCheck = (item) =>
  canonicalCIDR(item) ? undefined : `${show(item)} is not a CIDR`;
const checkIP: ItemCheck = (item) => (canonicalIP(item) ? undefined : `${show(item)} is not an IP address`);
/** Since 1.37 the keywords combine with each other and with CIDRs. */
const checkNodePortAddress: ItemCheck = (item) =>
  item === 'primary' || item === 'localhost' || item === 'all' || canonicalCIDR(item)
    ? undefined
    : `${show(item)} is not a CIDR, "primary", "localhost" or "all"`;
/** Linux allows up to 15 bytes; quotes, spaces and newlines would break the rules they are written into. */
const checkInterfaceName: ItemCheck = (item) =>
  /^[A-Za-z0-9_.-]{1,15}$/.test(item)
    ? undefined
    : `${show(item)} is not a network interface name (up to 15 of A-Z, a-z, 0-9, _ . -)`;
/** "IP:port", "[IPv6]:port", ":port", or a bare IP (kube-proxy then adds the default port). */
const checkBindAddress: ItemCheck = (item) => {
  if (canonicalIP(item)) return undefined;
  const parts = splitHostPort(item);
  if (parts === undefined || (parts.host !== '' && !canonicalIP(parts.host))) {
    return `${show(item)} is not an IP:port address`;
  }
  return parts.port <= MAX_PORT ? undefined : `${show(item)} has a port out of range (0-${MAX_PORT})`;
};

export const PROXY_MODES = ['iptables', 'nftables', 'ipvs'] as const;
/** What a configuration may ask for; the model's 'None' is what ClusterCIDR without CIDRs becomes. */
export const DETECT_LOCAL_MODES = [
  'ClusterCIDR',
  'NodeCIDR',
  'BridgeInterface',
  'InterfaceNamePrefix',
] as const satisfies readonly DetectLocalMode[];
export const IPVS_SCHEDULERS = [
  'rr',
  'wrr',
  'lc',
  'wlc',
  'lblc',
  'lblcr',
  'sh',
  'dh',
  'sed',
  'nq',
  'mh',
] as const;

const modeSection = {
  masqueradeAll: boolean,
  masqueradeBit: { type: 'integer', min: 0, max: 31 },
  syncPeriod: periodDuration,
  minSyncPeriod: periodDuration,
} as const;

/** Every field path kproxy reads from a config file (kube-proxy's names, plus kproxy's nodeIPs and fullSyncPeriod). */
export const CONFIG_FIELDS: ReadonlyMap<string, FieldSpec> = new Map<string, FieldSpec>([
  ['mode', { type: 'string', oneOf: PROXY_MODES }],
  ['hostnameOverride', string],
  ['nodeIPs', { type: 'list', check: checkIP }],
  ['bindAddress', { type: 'string', check: checkIP }],
  ['healthzBindAddress', { type: 'string', check: checkBindAddress }],
  ['metricsBindAddress', { type: 'string', check: checkBindAddress }],
  ['clusterCIDR', { type: 'list', check: checkCIDR }],
  ['detectLocalMode', { type: 'string', oneOf: DETECT_LOCAL_MODES }],
  ['detectLocal.bridgeInterface', { type: 'string', check: checkInterfaceName }],
  ['detectLocal.interfaceNamePrefix', { type: 'string', check: checkInterfaceName }],
  ['nodePortAddresses', { type: 'list', check: checkNodePortAddress }],
  ['masqueradeAll', boolean],
  ['syncPeriod', periodDuration],
  ['minSyncPeriod', periodDuration],
  // kproxy's own: kube-proxy forces a full sync hourly, fixed; here 0 turns it off.
  ['fullSyncPeriod', duration],
  ...sectionFields('iptables', { ...modeSection, localhostNodePorts: boolean }),
  ...sectionFields('nftables', modeSection),
  ['ipvs.scheduler', { type: 'string', oneOf: IPVS_SCHEDULERS }],
  ['ipvs.syncPeriod', periodDuration],
  ['ipvs.minSyncPeriod', duration],
  ['ipvs.strictARP', boolean],
  ['ipvs.tcpTimeout', duration],
  ['ipvs.tcpFinTimeout', duration],
  ['ipvs.udpTimeout', duration],
  ['ipvs.excludeCIDRs', { type: 'list', check: checkCIDR }],
  ['conntrack.maxPerCore', { type: 'integer', min: 0, max: INT32_MAX }],
  ['conntrack.min', { type: 'integer', min: 0, max: INT32_MAX }],
  ['conntrack.tcpEstablishedTimeout', duration],
  ['conntrack.tcpCloseWaitTimeout', duration],
  ['conntrack.tcpBeLiberal', boolean],
  ['conntrack.udpTimeout', duration],
  ['conntrack.udpStreamTimeout', duration],
  ['clientConnection.kubeconfig', string],
  ['clientConnection.qps', { type: 'number', min: 0, zeroIsUnset: true }],
  ['clientConnection.burst', { type: 'integer', min: 0, max: INT32_MAX, zeroIsUnset: true }],
  ['logging.verbosity', { type: 'integer', min: 0, max: INT32_MAX }],
  // Read by the logger's set-up; kube-proxy's default is text.
  ['logging.format', { type: 'string', oneOf: ['text', 'json'] }],
  // Applied at start; kube-proxy's range and default (-999).
  ['oomScoreAdj', { type: 'integer', min: -1000, max: 1000 }],
  // kube-proxy's fields that do nothing here. The field list is v1alpha1's in kubernetes/kubernetes
  // master at 052d2d84 (newer than 1.37; iptables.snatNodeInternalIP came with PR #138360, 2026),
  // which holds every field of 1.29-1.37. Removed fields (udpIdleTimeout, conntrack.max,
  // resourceContainer) are unknown, as in kube-proxy: the lenient decoding takes them with a warning.
  [
    'featureGates',
    {
      type: 'inert',
      why: 'kproxy has no feature gates: what it implements is always on',
      // A gate turned off is a setting too.
      matters: (raw) => typeof raw === 'object' && raw !== null && Object.keys(raw).length > 0,
    },
  ],
  [
    'bindAddressHardFail',
    {
      type: 'inert',
      why: 'kproxy always exits when it cannot listen on healthzBindAddress or metricsBindAddress',
      matters: (raw) => raw === false,
      shape: boolean,
    },
  ],
  ['enableProfiling', inert('kproxy serves no /debug/pprof', boolean)],
  ['showHiddenMetricsForVersion', inert('kproxy has no hidden metrics', string)],
  [
    'configSyncPeriod',
    inert("kproxy's informers never relist on a timer; a watch that ends is resumed", periodDuration),
  ],
  ['portRange', inert('unused by kube-proxy too since its userspace proxy was removed (1.26)', string)],
  ['windowsRunAsService', inert(WINDOWS_ONLY, boolean)],
  [
    'iptables.snatNodeInternalIP',
    inert("not implemented: kproxy masquerades to the egress interface's address", boolean),
  ],
  ...['networkName', 'sourceVip', 'rootHnsEndpointName'].map((name): [string, FieldSpec] => [
    `winkernel.${name}`,
    inert(WINKERNEL, string),
  ]),
  ...['enableDSR', 'forwardHealthCheckVip'].map((name): [string, FieldSpec] => [
    `winkernel.${name}`,
    inert(WINKERNEL, boolean),
  ]),
  [
    'clientConnection.acceptContentTypes',
    {
      type: 'inert',
      why: 'kproxy always asks for JSON',
      matters: (raw) => !isJsonContentType(raw),
      shape: string,
    },
  ],
  [
    'clientConnection.contentType',
    {
      type: 'inert',
      why: 'kproxy always sends JSON',
      matters: (raw) => !isJsonContentType(raw),
      shape: string,
    },
  ],
  ['logging.flushFrequency', inert('kproxy writes each log line as it happens')],
  ['logging.vmodule', inert('kproxy has no per-file verbosity: logging.verbosity applies everywhere')],
  ['logging.options', inert("kproxy's log lines go to one stream, unbuffered")],
]);

function sectionFields(section: string, fields: Readonly<Record<string, FieldSpec>>): [string, FieldSpec][] {
  return Object.entries(fields).map(([name, spec]) => [`${section}.${name}`, spec]);
}

/** Checks one raw value: from YAML (any JSON-like value) or from a flag (a string, boolean or string[]). */
export function parseFieldValue(spec: FieldSpec, raw: unknown): FieldParse {
  if (raw === null || raw === undefined) return unset;
  switch (spec.type) {
    case 'inert':
      return unset;
    case 'boolean':
      return typeof raw === 'boolean' ? { ok: true, value: raw } : fail(`${show(raw)} is not true or false`);
    case 'string': {
      if (typeof raw !== 'string') return fail(`${show(raw)} is not a string`);
      if (raw === '') return unset;
      if (spec.oneOf && !spec.oneOf.includes(raw))
        return fail(`${show(raw)} is not one of ${spec.oneOf.join(', ')}`);
      const reason = spec.check?.(raw);
      return reason === undefined ? { ok: true, value: raw } : fail(reason);
    }
    case 'integer':
    case 'number': {
      const value = typeof raw === 'string' && /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
      if (
        typeof value !== 'number' ||
        !Number.isFinite(value) ||
        (spec.type === 'integer' && !Number.isInteger(value))
      ) {
        return fail(`${show(raw)} is not ${spec.type === 'integer' ? 'an integer' : 'a number'}`);
      }
      if (spec.type === 'integer' && (value < spec.min || value > spec.max)) {
        return fail(`${value} is out of range (${spec.min}-${spec.max})`);
      }
      if (value < spec.min) return fail(`${value} is less than ${spec.min}`);
      return value === 0 && spec.zeroIsUnset ? unset : { ok: true, value };
    }
    case 'duration': {
      const ms = typeof raw === 'string' ? parseGoDuration(raw) : undefined;
      if (ms === undefined) return fail(`${show(raw)} is not a duration (like 30s, 1m0s, 500ms)`);
      // kube-proxy's validation: periods (whose 0 means the default) must be positive, the rest not negative.
      if (ms < 0)
        return fail(`${show(raw)}: must be greater than ${spec.zeroIsUnset ? '0' : 'or equal to 0'}`);
      return ms === 0 && spec.zeroIsUnset ? unset : { ok: true, value: ms };
    }
    case 'list': {
      const items = typeof raw === 'string' ? raw.split(',') : raw;
      if (!Array.isArray(items) || !items.every((item) => typeof item === 'string')) {
        return fail(`${show(raw)} is not a list of strings`);
      }
      const trimmed = items.map((item) => item.trim()).filter((item) => item !== '');
      for (const item of trimmed) {
        const reason = spec.check(item);
        if (reason !== undefined) return fail(reason);
      }
      return trimmed.length === 0 ? unset : { ok: true, value: trimmed };
    }
  }
}

const unset: FieldParse = { ok: true, value: undefined };

/** Whether a raw value of an inert field asks for something (and so deserves its warning). */
export function inertValueMatters(spec: Extract<FieldSpec, { type: 'inert' }>, raw: unknown): boolean {
  return spec.matters ? spec.matters(raw) : !isZeroValue(raw);
}

/** Go's zero values as YAML writes them (kubeadm writes every field, most of them zero). */
function isZeroValue(raw: unknown): boolean {
  if (raw === null || raw === undefined || raw === false || raw === 0 || raw === '') return true;
  if (typeof raw === 'string') return parseGoDuration(raw) === 0 || raw === '0';
  if (Array.isArray(raw)) return raw.length === 0;
  return typeof raw === 'object' && Object.values(raw).every(isZeroValue);
}

function isJsonContentType(raw: unknown): boolean {
  return raw === null || raw === '' || raw === 'application/json';
}

function fail(reason: string): FieldParse {
  return { ok: false, reason };
}

/** A value as it appears in a message: strings quoted, everything else as JSON. */
export function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}
