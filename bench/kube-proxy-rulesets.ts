// Rulesets shaped as upstream kube-proxy writes them, for the bench cluster (synthetic-cluster.ts:
// the same Services, addresses and endpoints kproxy is measured on), so "× kube-proxy's shape" is
// a ratio from one run. The shapes are those of ../shared/reference/kernel-baseline/README.md:
// - nftables mode (knftables `add` commands): table ip kube-proxy, the cluster-ips set and the
//   service-ips verdict map; per service port a chain (masquerade off-cluster sources, then
//   `numgen random mod E vmap { i : goto endpoint-… }`, an anonymous set per service) and per
//   endpoint a chain (hairpin masquerade, dnat). kube-proxy's filter-table chains are left out;
// - iptables mode (iptables-restore, nat table, small-cluster format with every comment):
//   KUBE-SERVICES with one rule per service port, a KUBE-SVC chain per service port
//   (masquerade, then a `-m statistic` ladder) and a KUBE-SEP chain per endpoint.
// Pure: generators of lines, written to files by the bench (44 MB at 10,000 × 10).
import { hash16 } from '../dataplanes/iptables/chain-names.ts';
import { syntheticService, syntheticSlice } from './synthetic-cluster.ts';

const POD_CIDR = '10.244.0.0/16';
const TABLE = 'ip kube-proxy';
/** The service port every synthetic Service has (name http, TCP 80). */
const PORT = 80;

interface Backend {
  readonly ip: string;
  readonly port: number;
}

interface ServiceShape {
  readonly namespace: string;
  readonly name: string;
  readonly vip: string;
  readonly endpoints: readonly Backend[];
}

/** Service i of the bench cluster; `variant` as syntheticSlice's (its first endpoint moved). */
function service(i: number, endpoints: number, variant = 0): ServiceShape {
  const { metadata, spec } = syntheticService(i);
  const slice = syntheticSlice(i, endpoints, 1, variant);
  const port = slice.ports![0]!.port!;
  return {
    namespace: metadata.namespace!,
    name: metadata.name,
    vip: spec.clusterIP!,
    endpoints: slice.endpoints!.map((e) => ({ ip: e.addresses[0]!, port })),
  };
}

// ---- nftables mode

const NFT_BASE = [
  `add table ${TABLE} { comment "rules for kube-proxy" ; }`,
  `add set ${TABLE} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`,
  `add set ${TABLE} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }`,
  `add map ${TABLE} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
  `add map ${TABLE} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`,
  `add chain ${TABLE} mark-for-masquerade`,
  `add chain ${TABLE} masquerading`,
  `add chain ${TABLE} nat-output { type nat hook output priority -100 ; }`,
  `add chain ${TABLE} nat-postrouting { type nat hook postrouting priority 100 ; }`,
  `add chain ${TABLE} nat-prerouting { type nat hook prerouting priority -100 ; }`,
  `add chain ${TABLE} services`,
  `add rule ${TABLE} mark-for-masquerade mark set mark or 0x4000`,
  `add rule ${TABLE} masquerading mark and 0x4000 == 0 return`,
  `add rule ${TABLE} masquerading mark set mark xor 0x4000`,
  `add rule ${TABLE} masquerading masquerade fully-random`,
  `add rule ${TABLE} nat-output jump services`,
  `add rule ${TABLE} nat-postrouting jump masquerading`,
  `add rule ${TABLE} nat-prerouting jump services`,
  `add rule ${TABLE} services ip daddr . meta l4proto . th dport vmap @service-ips`,
  `add rule ${TABLE} services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
];

/** kube-proxy's nftables chain names: 8 characters of the hash, then the readable name. */
function nftServiceChain(s: ServiceShape): string {
  const name = `${s.namespace}/${s.name}/tcp/http`;
  return `service-${hash16(name).slice(0, 8)}-${name}`;
}

function nftEndpointChain(s: ServiceShape, e: Backend): string {
  const name = `${s.namespace}/${s.name}/tcp/http__${e.ip}/${e.port}`;
  return `endpoint-${hash16(name).slice(0, 8)}-${name}`;
}

/** The table, its sets, maps, hooked chains and fixed rules. */
export function* kubeProxyNftBase(): Generator<string> {
  yield* NFT_BASE;
}

/**
 * Services [from, to): their endpoint chains (created before the service chain's vmap names them),
 * service chains, rules, and their cluster-ips and service-ips elements.
 */
export function* kubeProxyNftServices(from: number, to: number, endpoints: number): Generator<string> {
  const vips: string[] = [];
  const verdicts: string[] = [];
  for (let i = from; i < to; i++) {
    const s = service(i, endpoints);
    const chain = nftServiceChain(s);
    for (const e of s.endpoints) {
      const ep = nftEndpointChain(s, e);
      yield `add chain ${TABLE} ${ep}`;
      yield `add rule ${TABLE} ${ep} ip saddr ${e.ip} jump mark-for-masquerade`;
      yield `add rule ${TABLE} ${ep} meta l4proto tcp dnat to ${e.ip}:${e.port}`;
    }
    yield `add chain ${TABLE} ${chain}`;
    yield `add rule ${TABLE} ${chain} ip daddr ${s.vip} ip saddr != ${POD_CIDR} jump mark-for-masquerade`;
    const picks = s.endpoints.map((e, j) => `${j} : goto ${nftEndpointChain(s, e)}`).join(', ');
    yield `add rule ${TABLE} ${chain} numgen random mod ${s.endpoints.length} vmap { ${picks} }`;
    vips.push(s.vip);
    verdicts.push(`${s.vip} . tcp . ${PORT} : goto ${chain}`);
  }
  // One element statement per 1,000 services keeps the lines reasonable.
  for (let k = 0; k < vips.length; k += 1000) {
    yield `add element ${TABLE} cluster-ips { ${vips.slice(k, k + 1000).join(', ')} }`;
    yield `add element ${TABLE} service-ips { ${verdicts.slice(k, k + 1000).join(', ')} }`;
  }
}

/** kube-proxy's full nftables sync into an empty namespace: one transaction. */
export function* kubeProxyNftRuleset(services: number, endpoints: number): Generator<string> {
  yield* kubeProxyNftBase();
  yield* kubeProxyNftServices(0, services, endpoints);
}

/** The same rules as one transaction for the base and one per `chunk` services. */
export function* kubeProxyNftChunks(
  services: number,
  endpoints: number,
  chunk: number,
): Generator<Iterable<string>> {
  yield kubeProxyNftBase();
  for (let from = 0; from < services; from += chunk) {
    yield kubeProxyNftServices(from, Math.min(services, from + chunk), endpoints);
  }
}

// ---- iptables mode

function iptServicePortName(s: ServiceShape): string {
  return `${s.namespace}/${s.name}:http`;
}

function iptServiceChain(s: ServiceShape): string {
  return `KUBE-SVC-${hash16(`${iptServicePortName(s)}tcp`)}`;
}

function iptEndpointChain(s: ServiceShape, e: Backend): string {
  return `KUBE-SEP-${hash16(`${iptServicePortName(s)}tcp${e.ip}:${e.port}`)}`;
}

const IPT_TOP_CHAINS = ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'];

function* iptTopRules(services: number, endpoints: number): Generator<string> {
  yield '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN';
  yield '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000';
  yield '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully';
  yield '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000';
  for (let i = 0; i < services; i++) {
    const s = service(i, endpoints);
    yield `-A KUBE-SERVICES -m comment --comment "${iptServicePortName(s)} cluster IP" -m tcp -p tcp -d ${s.vip}/32 --dport ${PORT} -j ${iptServiceChain(s)}`;
  }
  yield '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS';
}

function* iptServiceChains(s: ServiceShape): Generator<string> {
  yield `:${iptServiceChain(s)} - [0:0]`;
  for (const e of s.endpoints) yield `:${iptEndpointChain(s, e)} - [0:0]`;
}

function* iptServiceRules(s: ServiceShape): Generator<string> {
  const spn = iptServicePortName(s);
  const svc = iptServiceChain(s);
  yield `-A ${svc} -m comment --comment "${spn} cluster IP" -m tcp -p tcp -d ${s.vip}/32 --dport ${PORT} ! -s ${POD_CIDR} -j KUBE-MARK-MASQ`;
  const n = s.endpoints.length;
  for (const [j, e] of s.endpoints.entries()) {
    const comment = `-m comment --comment "${spn} -> ${e.ip}:${e.port}"`;
    const pick = j < n - 1 ? ` -m statistic --mode random --probability ${(1 / (n - j)).toFixed(10)}` : '';
    yield `-A ${svc} ${comment}${pick} -j ${iptEndpointChain(s, e)}`;
  }
  for (const e of s.endpoints) {
    const sep = iptEndpointChain(s, e);
    yield `-A ${sep} -m comment --comment ${spn} -s ${e.ip}/32 -j KUBE-MARK-MASQ`;
    yield `-A ${sep} -m comment --comment ${spn} -m tcp -p tcp -j DNAT --to-destination ${e.ip}:${e.port}`;
  }
}

/** kube-proxy's iptables ruleset as one flushing iptables-restore of the nat table. */
export function* kubeProxyIptablesRestore(services: number, endpoints: number): Generator<string> {
  yield '*nat';
  for (const chain of ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING']) yield `:${chain} ACCEPT [0:0]`;
  for (const chain of IPT_TOP_CHAINS) yield `:${chain} - [0:0]`;
  for (let i = 0; i < services; i++) yield* iptServiceChains(service(i, endpoints));
  yield '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES';
  yield '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES';
  yield '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING';
  yield* iptTopRules(services, endpoints);
  for (let i = 0; i < services; i++) yield* iptServiceRules(service(i, endpoints));
  yield 'COMMIT';
}

/**
 * The --noflush restore of service `changed` after its first endpoint moved from variant `from`
 * to `to`: its KUBE-SVC chain and every KUBE-SEP chain rewritten (declaring a chain flushes it),
 * the stale KUBE-SEP chain declared and deleted. With `topLevel` also KUBE-SERVICES and the other
 * top-level chains in full: kube-proxy's own partial sync (MinimizeIPTablesRestore).
 */
export function* kubeProxyIptablesPartial(
  services: number,
  endpoints: number,
  changed: { readonly service: number; readonly from: number; readonly to: number },
  topLevel: boolean,
): Generator<string> {
  const now = service(changed.service, endpoints, changed.to);
  const stale = iptEndpointChain(now, service(changed.service, endpoints, changed.from).endpoints[0]!);
  yield '*nat';
  if (topLevel) for (const chain of IPT_TOP_CHAINS) yield `:${chain} - [0:0]`;
  yield* iptServiceChains(now);
  yield `:${stale} - [0:0]`;
  if (topLevel) yield* iptTopRules(services, endpoints);
  yield* iptServiceRules(now);
  yield `-X ${stale}`;
  yield 'COMMIT';
}
