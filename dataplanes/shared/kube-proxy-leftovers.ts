// What an upstream kube-proxy leaves in the kernel, for `kproxy cleanup --kube-proxy` when a node
// switches over: its iptables chains (both backends) with the rules in built-in chains that jump
// to them and its nftables tables (`ip kube-proxy`, `ip6 kube-proxy`) first, so that every new
// connection meets kproxy's rules; then its IPVS mode's virtual services (all of them, as
// kube-proxy's cleanup flushes IPVS, but those kproxy's IPVS mode took over in place; only when
// ip_vs is loaded), once the connections IPVS balances have drained (ipvs-drain.ts), and the
// kube-ipvs0 link, then the conntrack entries of the connections that cut; then, once no iptables
// rule refers to them, its ipsets and its nfacct objects. Only kube-proxy's own: the KUBE-* chains
// kubelet owns (KUBE-MARK-DROP, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, and KUBE-FIREWALL as
// kubelet before 1.28 filled it) and ipsets of other names (kube-router's KUBE-DST-*, ...) stay.
// Since 1.28 kube-proxy makes filter's KUBE-FIREWALL itself, holding one rule (the localnet drop)
// and jumped to from INPUT and OUTPUT without a comment; its own cleanup leaves both, this removes
// them when the chain holds nothing but that rule.

import { type CommandRunner, IPTABLES_WAIT } from './command-runner.ts';
import type { ConntrackDeleter } from './conntrack/conntrack-netlink.ts';
import { existingIptablesTables } from './existing-iptables-tables.ts';
import { removalInputs } from './iptables-save.ts';
import type { VirtualServiceKey } from './ipvs-connection-list.ts';
import { type DrainBound, removeAfterDrain } from './ipvs-drain.ts';

const KUBE_PROXY_CHAINS = new Set([
  'KUBE-SERVICES',
  'KUBE-EXTERNAL-SERVICES',
  'KUBE-NODEPORTS',
  'KUBE-POSTROUTING',
  'KUBE-MARK-MASQ',
  'KUBE-FORWARD',
  'KUBE-PROXY-FIREWALL',
  'KUBE-PROXY-CANARY',
  // IPVS mode's iptables helpers.
  'KUBE-LOAD-BALANCER',
  'KUBE-NODE-PORT',
  'KUBE-LOOP-BACK',
  'KUBE-SOURCE-RANGES-FIREWALL',
  'KUBE-IPVS-FILTER',
  'KUBE-IPVS-OUT-FILTER',
]);
const KUBE_PROXY_CHAIN_PREFIXES = [
  'KUBE-SVC-',
  'KUBE-SVL-',
  'KUBE-EXT-',
  'KUBE-FW-',
  'KUBE-SEP-',
  'KUBE-XLB-',
];

/** kube-proxy's IPVS mode ipsets (pkg/proxy/ipvs/ipset.go); its IPv6 ones are KUBE-6-*. */
const KUBE_PROXY_IPSETS = [
  'LOOP-BACK',
  'CLUSTER-IP',
  'EXTERNAL-IP',
  'EXTERNAL-IP-LOCAL',
  'LOAD-BALANCER',
  'LOAD-BALANCER-FW',
  'LOAD-BALANCER-LOCAL',
  'LOAD-BALANCER-SOURCE-IP',
  'LOAD-BALANCER-SOURCE-CIDR',
  'NODE-PORT-TCP',
  'NODE-PORT-LOCAL-TCP',
  'NODE-PORT-UDP',
  'NODE-PORT-LOCAL-UDP',
  'NODE-PORT-SCTP-HASH',
  'NODE-PORT-LOCAL-SCTP-HASH',
  'HEALTH-CHECK-NODE-PORT',
  'IPVS-IPS',
].flatMap((name) => [`KUBE-${name}`, `KUBE-6-${name}`]);

/** kube-proxy's IPVS mode's dummy link, holding the service addresses. */
const KUBE_IPVS_LINK = 'kube-ipvs0';

export function isKubeProxyIpset(name: string): boolean {
  return KUBE_PROXY_IPSETS.includes(name);
}

/** The IPVS table, as far as the cleanup needs it (dataplanes/ipvs/ipvs-client.ts's IpvsClient). */
export interface VirtualServiceTable<S extends VirtualServiceKey> {
  listServices(): Promise<S[]>;
  /** False when the service was gone already (removed during the drain by another owner). */
  deleteService(service: S): Promise<boolean>;
  close(): void;
}

export interface LeftoverOptions<S extends VirtualServiceKey> {
  /** The IPVS table when ip_vs is loaded, else undefined (nothing of IPVS is touched). */
  readonly openIpvs?: () => Promise<VirtualServiceTable<S> | undefined>;
  /**
   * Deletes the conntrack entries of the connections IPVS balanced when its services went, in the
   * namespace of the IPVS table: needed with openIpvs.
   */
  readonly conntrack?: ConntrackDeleter;
  /** The drain before the virtual services go: DEFAULT_IPVS_DRAIN_MS, nothing reported, by default. */
  readonly drain?: DrainBound;
  /**
   * The virtual services kproxy's IPVS mode holds (on its kproxy-ipvs0's addresses): kube-proxy's
   * that kproxy's took over in place (same address, port, protocol), which stay with their connections.
   */
  readonly kproxyOwns?: () => Promise<(service: S) => boolean>;
  /** Per-service chains per iptables-nft-restore input (KUBE_PROXY_CHAINS_PER_RESTORE by default). */
  readonly nftChainsPerRestore?: number;
}

/** The comment of the one rule kube-proxy (1.28+) keeps in filter's KUBE-FIREWALL. */
const LOCALNET_DROP_COMMENT = '"block incoming localnet connections"';
const FIREWALL_CHAIN = 'KUBE-FIREWALL';

/**
 * kube-proxy's nfacct objects (its iptables mode counts in them). kproxy's iptables mode keeps the
 * same names; the kernel refuses to delete one a rule still counts in, so those stay.
 */
const KUBE_PROXY_NFACCT = ['ct_state_invalid_dropped_pkts', 'localhost_nps_accepted_pkts'];

export function isKubeProxyChain(chain: string): boolean {
  return KUBE_PROXY_CHAINS.has(chain) || KUBE_PROXY_CHAIN_PREFIXES.some((prefix) => chain.startsWith(prefix));
}

/** kube-proxy's per-service chains, each before the chains it may jump to (FW → EXT → XLB → SVC/SVL → SEP). */
const KUBE_PROXY_REFERRER_ORDER = [
  'KUBE-FW-',
  'KUBE-EXT-',
  'KUBE-XLB-',
  'KUBE-SVC-',
  'KUBE-SVL-',
  'KUBE-SEP-',
];

/**
 * Per-service chains per iptables-nft-restore input, kproxy's own restores' size
 * (dataplanes/iptables/restore-chunks.ts). One input for kube-proxy's 110k chains at 10k services
 * ran over 7.5 min; pieces of 1,000, 3,000 or 10,000 took 47-55 s (docs/benchmarks.md, "Takeover
 * from kube-proxy").
 */
export const KUBE_PROXY_CHAINS_PER_RESTORE = 1000;

/**
 * The iptables-restore --noflush inputs that remove kube-proxy's chains from one table given its
 * iptables-save output, in parts of at most maxChains per-service chains (removalInputs): jump
 * rules from other chains first, then the chains (flushed, deleted). None when there is nothing
 * of kube-proxy's.
 */
export function leftoverRestoreInputs(table: string, saved: string, maxChains: number): string[] {
  const firewall = table === 'filter' && isKubeProxyFirewall(saved);
  const owned = (chain: string) => isKubeProxyChain(chain) || (firewall && chain === FIREWALL_CHAIN);
  return removalInputs(table, saved, owned, KUBE_PROXY_REFERRER_ORDER, maxChains);
}

/** filter's KUBE-FIREWALL is kube-proxy's when its only rule is kube-proxy's localnet drop. */
function isKubeProxyFirewall(saved: string): boolean {
  const rules = saved.split('\n').filter((line) => line.startsWith(`-A ${FIREWALL_CHAIN} `));
  return rules.length === 1 && rules[0]!.includes(`--comment ${LOCALNET_DROP_COMMENT}`);
}

const IPTABLES_TABLES = ['nat', 'filter', 'mangle'];
const IPTABLES_TOOLS = ['iptables-nft', 'ip6tables-nft', 'iptables-legacy', 'ip6tables-legacy'];

/** Removes kube-proxy's leftovers (IPVS, both iptables backends, ipsets, nft); returns what it removed. */
export async function removeKubeProxyLeftovers<S extends VirtualServiceKey>(
  runner: CommandRunner,
  options: LeftoverOptions<S> = {},
): Promise<string[]> {
  const removed: string[] = [];
  // kube-proxy's rules first: its IPVS mode's nat KUBE-SERVICES accepts connections to its
  // addresses (ending iptables' nat chain, so IPVS would balance them); without it every new
  // connection is kproxy's from here on, and only those IPVS already balances are left to drain.
  removed.push(
    ...(await removeIptablesChains(runner, options.nftChainsPerRestore ?? KUBE_PROXY_CHAINS_PER_RESTORE)),
  );
  removed.push(...(await removeNftTables(runner)));
  removed.push(...(await removeIpvsServices(runner, options)));
  removed.push(...(await removeIpsets(runner)));
  removed.push(...(await removeNfacctObjects(runner)));
  return removed;
}

/**
 * kube-proxy's virtual services (not those kproxy's IPVS mode took over, `kproxyOwns`) once their
 * connections drained, kube-ipvs0, then the conntrack entries of the connections IPVS still
 * balanced when they went (ipvs-drain.ts removeAfterDrain). Who owns a service is read again after
 * the drain: kproxy's IPVS mode, running, takes over in place a virtual service on an address it
 * binds (its first full sync, or a Service it serves from now on), and one it took during the
 * drain (minutes) is its own, serving its Service, and stays with its connections.
 */
async function removeIpvsServices<S extends VirtualServiceKey>(
  runner: CommandRunner,
  options: LeftoverOptions<S>,
): Promise<string[]> {
  const removed: string[] = [];
  const ipvs = await options.openIpvs?.();
  try {
    const listed = (await ipvs?.listServices()) ?? [];
    // Read only when there is IPVS to judge: it costs tool runs.
    const notKproxys = async (services: readonly S[]) => {
      if (services.length === 0 || options.kproxyOwns === undefined) return services;
      const kproxyOwns = await options.kproxyOwns();
      return services.filter((service) => !kproxyOwns(service));
    };
    const services = await notKproxys(listed);
    const drain = options.drain ?? { report: () => {} };
    const cut = await removeAfterDrain(
      runner,
      services,
      { drain, conntrack: options.conntrack },
      async () => {
        const still = await notKproxys(services);
        let gone = 0;
        for (const service of still) if (await ipvs!.deleteService(service)) gone++;
        if (gone > 0) removed.push(`IPVS: ${gone} virtual service(s)`);
        const kept = services.filter((service) => !still.includes(service));
        if ((await runner.run('ip', ['link', 'show', KUBE_IPVS_LINK])).exitCode !== 0) return kept;
        const deleted = await runner.run('ip', ['link', 'delete', KUBE_IPVS_LINK]);
        if (deleted.exitCode !== 0)
          throw new Error(`ip link delete ${KUBE_IPVS_LINK}: ${deleted.stderr.trim()}`);
        removed.push(`link ${KUBE_IPVS_LINK}`);
        return kept;
      },
    );
    removed.push(...cut);
  } finally {
    ipvs?.close();
  }
  return removed;
}

/**
 * Deleted without listing first: nft 1.0.6's `list tables` reads every table whole (over 3.5 min
 * beside kproxy's iptables-nft rules for 10k services, against 6 s for this delete); a table that
 * is not there is the delete's ENOENT. No nft tool (127): kube-proxy's nftables mode, which runs
 * nft, cannot have run here.
 */
async function removeNftTables(runner: CommandRunner): Promise<string[]> {
  const removed: string[] = [];
  for (const family of ['ip', 'ip6']) {
    const deleted = await runner.run('nft', ['delete', 'table', family, 'kube-proxy']);
    if (deleted.exitCode === 0) removed.push(`nft table ${family} kube-proxy`);
    else if (deleted.exitCode !== 127 && !/No such file or directory/.test(deleted.stderr))
      throw new Error(`nft delete table ${family} kube-proxy: ${deleted.stderr.trim()}`);
  }
  return removed;
}

async function removeIptablesChains(runner: CommandRunner, nftChainsPerRestore: number): Promise<string[]> {
  const removed: string[] = [];
  for (const tool of IPTABLES_TOOLS) {
    // iptables-legacy rewrites its whole table per input: there one input is cheapest.
    const maxChains = tool.endsWith('-nft') ? nftChainsPerRestore : Number.POSITIVE_INFINITY;
    // Only the tables the backend holds: asking for one by name would create it.
    const tables = await existingIptablesTables(runner, `${tool}-save`);
    for (const table of IPTABLES_TABLES) {
      const saved = tables.get(table);
      if (saved === undefined) continue;
      const inputs = leftoverRestoreInputs(table, saved, maxChains);
      for (const input of inputs) {
        const restored = await runner.run(`${tool}-restore`, ['--noflush', ...IPTABLES_WAIT], input);
        if (restored.exitCode !== 0) throw new Error(`${tool}-restore (${table}): ${restored.stderr.trim()}`);
      }
      const count = inputs
        .join('')
        .split('\n')
        .filter((line) => line.startsWith('-X ')).length;
      if (inputs.length > 0) removed.push(`${tool} ${table}: ${count} kube-proxy chain(s)`);
    }
  }
  return removed;
}

/** After the iptables rules: a set an iptables rule still refers to cannot be destroyed. */
async function removeIpsets(runner: CommandRunner): Promise<string[]> {
  const listed = await runner.run('ipset', ['list', '-n']);
  // No ipset tool (or no ip_set module): kube-proxy's IPVS mode cannot have run here.
  if (listed.exitCode !== 0) return [];
  const names = listed.stdout.split('\n').filter(isKubeProxyIpset);
  if (names.length === 0) return [];
  // In one run: a tool start costs seconds on a loaded node (and in the emulated VM), and
  // kube-proxy's IPVS mode leaves up to 34 sets.
  const input = names.map((name) => `destroy ${name}\n`).join('');
  const destroyed = await runner.run('ipset', ['restore'], input);
  if (destroyed.exitCode !== 0) throw new Error(`ipset restore (destroy): ${destroyed.stderr.trim()}`);
  return [`ipset: ${names.join(', ')}`];
}

/** After the iptables rules, which count in them; one still counted in (kproxy's iptables mode) stays. */
async function removeNfacctObjects(runner: CommandRunner): Promise<string[]> {
  const listed = await runner.run('nfacct', ['list']);
  // No nfacct tool (or no nfnetlink_acct): nothing can have been made with it.
  if (listed.exitCode !== 0) return [];
  const names = KUBE_PROXY_NFACCT.filter((name) => listed.stdout.includes(` = ${name};`));
  const deleted: string[] = [];
  for (const name of names) {
    const result = await runner.run('nfacct', ['delete', name]);
    if (result.exitCode === 0) deleted.push(name);
    else if (!/busy/i.test(result.stderr)) throw new Error(`nfacct delete ${name}: ${result.stderr.trim()}`);
  }
  return deleted.length === 0 ? [] : [`nfacct: ${deleted.join(', ')}`];
}
