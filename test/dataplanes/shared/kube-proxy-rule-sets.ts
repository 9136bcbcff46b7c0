// Upstream kube-proxy's own iptables and nftables rules on a lab node, for the takeover tests (issue
// 29): the host's (kube-proxy-takeover.test.ts) and the VM's (ipvs/vm/kube-proxy-ipvs-takeover).
// The rules are upstream's proxier tests' expected dumps (fixtures/kube-proxy, SOURCES.md there),
// and beside them rules written from upstream's proxiers for what no dump holds (a UDP ClusterIP;
// in nftables a Local NodePort with a local endpoint), loaded in the same restore or transaction;
// the iptables ones are loaded with the 14 jumps, canary chains, nfacct objects and
// route_localnet=1 kube-proxy adds outside its restore. Adapted, and only this: the endpoint
// addresses (ENDPOINTS: the lab's pods), the pod CIDR (POD_CIDRS: the lab's), nftables' node IP
// (its nodeport-ips element), and the nftables dump's line order (the fake's dump lists a chain
// after a rule that jumps to it; `nft -f` needs every table, set, map and chain declared first, as
// kube-proxy's own transaction does).
import { readFile } from 'node:fs/promises';
import type { ServicePort } from '../../../contract/proxy-state.ts';
import type { Lab } from '../../../harness/netns.ts';
import { endpoint, servicePort } from '../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4 } from '../../../harness/topology.ts';

export const fixture = (name: string) => new URL(`fixtures/kube-proxy/${name}`, import.meta.url);
/** The node IP of upstream's nftables test (testNodeIPs), its only nodeport-ips element. */
const UPSTREAM_NODE_IP = '192.168.0.2';
/**
 * Upstream's pod CIDR (its local traffic detector) → this lab's: the lab's client (10.100.0.200) is
 * inside 10.0.0.0/8, and kube-proxy short-circuits a pod's traffic to an eTP Local NodePort to
 * every endpoint, so the client would not be the outside world these tests need.
 */
export const POD_CIDRS = ['10.0.0.0/8', CLUSTER_CIDR_V4] as const;

export const [POD0, POD1] = ['10.244.1.10', '10.244.1.11'] as const;
/** Upstream's endpoint addresses → this lab's pods (node-0-pod-0, node-0-pod-1). */
const ENDPOINTS: Readonly<Record<string, string>> = {
  '10.180.0.1': POD0,
  '10.180.0.3': POD1,
  '10.180.0.4': POD0,
  '10.180.0.5': POD1,
  // The eTP Local dump's endpoint on upstream's test node: the only one its NodePort may use.
  '10.180.2.1': POD1,
};
/** The pod behind 10.180.2.1, by its echo server's name. */
export const LOCAL_POD = 'node-0-pod-1';

/**
 * What kube-proxy's iptables proxier ensures outside its restore (`iptables -C` then `-I`, so they
 * come first in the built-in chains): its 12 commented jumps, kubelet's-turned-its two comment-less
 * jumps to KUBE-FIREWALL, and a KUBE-PROXY-CANARY chain in mangle, nat and filter.
 */
const JUMPS: readonly (readonly string[])[] = [
  [
    'filter',
    'INPUT',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  ],
  [
    'filter',
    'FORWARD',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  ],
  ['filter', 'INPUT', '-m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS'],
  [
    'filter',
    'FORWARD',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ],
  [
    'filter',
    'OUTPUT',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  ],
  ['filter', 'FORWARD', '-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD'],
  [
    'filter',
    'INPUT',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  ],
  [
    'filter',
    'OUTPUT',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  ],
  [
    'filter',
    'FORWARD',
    '-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
  ],
  ['nat', 'OUTPUT', '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  ['nat', 'PREROUTING', '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  ['nat', 'POSTROUTING', '-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING'],
  ['filter', 'INPUT', '-j KUBE-FIREWALL'],
  ['filter', 'OUTPUT', '-j KUBE-FIREWALL'],
];
const CANARY_TABLES = ['mangle', 'nat', 'filter'];
export const NFACCT = ['ct_state_invalid_dropped_pkts', 'localhost_nps_accepted_pkts'];

/** Where the client connects; `localOnly`: externalTrafficPolicy Local, only LOCAL_POD may answer. */
export interface Target {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  /** TCP unless said. */
  readonly proto?: 'tcp' | 'udp';
  readonly localOnly?: boolean;
}

/** A rule set's Services that carry traffic here: kproxy's model of them, what is probed and held. */
export interface RuleSetServices {
  readonly ports: () => ServicePort[];
  readonly probed: (nodeIP: string) => Target[];
  readonly held: (nodeIP: string) => Target[];
}

/** The Services of a dump and of the written rules loaded beside it, as one rule set's. */
export function together(...parts: readonly RuleSetServices[]): RuleSetServices {
  return {
    ports: () => parts.flatMap((part) => part.ports()),
    probed: (nodeIP) => parts.flatMap((part) => part.probed(nodeIP)),
    held: (nodeIP) => parts.flatMap((part) => part.held(nodeIP)),
  };
}

/** A dump: a fixture, or its text (iptablesOverallWithEtpLocal). */
export type Dump = URL | { readonly text: string };

/** Upstream's dump, or rules written beside it, as they apply to the lab's node. */
async function adapted(dump: Dump, nodeIP: string): Promise<string> {
  let text = dump instanceof URL ? await readFile(dump, 'utf8') : dump.text;
  for (const [upstream, here] of Object.entries(ENDPOINTS)) text = text.replaceAll(upstream, here);
  return text.replaceAll(UPSTREAM_NODE_IP, nodeIP).replaceAll(POD_CIDRS[0], POD_CIDRS[1]);
}

/** Declarations first (table, sets and maps, chains), then rules and elements, each in dump order. */
function declarationsFirst(script: string): string {
  const rank = (line: string) =>
    line.startsWith('add table')
      ? 0
      : /^add (set|map) /.test(line)
        ? 1
        : line.startsWith('add chain')
          ? 2
          : 3;
  const lines = script.split('\n').filter((line) => line.startsWith('add '));
  return `${lines.sort((a, b) => rank(a) - rank(b)).join('\n')}\n`;
}

/** kube-proxy's nfacct objects where missing, as its start and kproxy run's iptables mode make them. */
const ENSURE_NFACCT = NFACCT.map(
  (name) => `nfacct list </dev/null | grep -q ' = ${name};' || nfacct add ${name} </dev/null`,
);

export async function ensureNfacct(lab: Lab, ns: string): Promise<void> {
  await lab.exec(ns, 'sh', ['-ec', ENSURE_NFACCT.join('\n')]);
}

/**
 * kube-proxy's iptables mode starting: nfacct, its restore (--noflush, as it runs it: the dump, then
 * the written rules' tables, `besides`), jumps, canaries, sysctl. The tool runs in one shell (each
 * tool start costs seconds in the qemu VM).
 */
export async function startIptablesKubeProxy(
  lab: Lab,
  ns: string,
  nodeIP: string,
  dump: Dump,
  besides: readonly URL[] = [],
): Promise<void> {
  const script = [
    ...ENSURE_NFACCT,
    // The restore is the shell's input, read by this command alone.
    'iptables-nft-restore --noflush --wait',
    ...CANARY_TABLES.map(
      (table) =>
        `iptables-nft -t ${table} -S KUBE-PROXY-CANARY >/dev/null 2>&1 || iptables-nft -t ${table} -N KUBE-PROXY-CANARY`,
    ),
    ...JUMPS.map(
      ([table, chain, rule]) =>
        `iptables-nft -t ${table} -C ${chain} ${rule} 2>/dev/null || iptables-nft -t ${table} -I ${chain} ${rule}`,
    ),
  ];
  await lab.exec(ns, 'sh', ['-ec', script.join('\n')], { input: await rulesInput(dump, besides, nodeIP) });
  await lab.sysctl(ns, 'net.ipv4.conf.all.route_localnet', '1');
}

/** The dump and the rules written beside it, adapted, one after the other. */
async function rulesInput(dump: Dump, besides: readonly URL[], nodeIP: string): Promise<string> {
  const texts = await Promise.all([dump, ...besides].map((file) => adapted(file, nodeIP)));
  return texts.join('');
}

/** kube-proxy's nftables mode starting: its whole table, and the rules written beside it, in one transaction. */
export async function startNftablesKubeProxy(
  lab: Lab,
  ns: string,
  nodeIP: string,
  dump: Dump,
  besides: readonly URL[] = [],
): Promise<void> {
  await lab.exec(ns, 'nft', ['-f', '-'], {
    input: declarationsFirst(await rulesInput(dump, besides, nodeIP)),
  });
}

/**
 * The overall dumps (TestOverallIPTablesRules, TestOverallNFTablesRules): their Services that carry
 * traffic here, as kproxy's model gives them for this node.
 */
export const OVERALL = {
  ports: (): ServicePort[] => [
    servicePort('svc1', {
      namespace: 'ns1',
      portName: 'p80',
      clusterIP: '172.30.0.41',
      clusterEndpoints: [endpoint(POD0, 80)],
    }),
    servicePort('svc3', {
      namespace: 'ns3',
      portName: 'p80',
      clusterIP: '172.30.0.43',
      nodePort: 3003,
      clusterEndpoints: [endpoint(POD1, 80)],
    }),
    servicePort('svc4', {
      namespace: 'ns4',
      portName: 'p80',
      clusterIP: '172.30.0.44',
      externalIPs: ['192.168.99.33'],
      clusterEndpoints: [endpoint(POD0, 80), endpoint(POD1, 80, { isLocal: true })],
    }),
    servicePort('svc6', {
      namespace: 'ns6',
      portName: 'p80',
      clusterIP: '172.30.0.46',
      hasEndpoints: false,
    }),
  ],
  probed: (nodeIP: string): Target[] => [
    { name: 'ClusterIP', host: '172.30.0.41', port: 80 },
    { name: 'NodePort Cluster', host: nodeIP, port: 3003 },
  ],
  /** svc4's cluster IP: two endpoints, so a held connection's backend is a choice to keep. */
  held: (): Target[] => [{ name: 'ClusterIP of two endpoints', host: '172.30.0.44', port: 80 }],
} satisfies RuleSetServices;

/** The eTP Local dump (TestExternalTrafficPolicyLocal): ns1/svc1, LoadBalancer, NodePort 3001. */
export const ETP_LOCAL = {
  ports: (): ServicePort[] => [
    servicePort('svc1', {
      namespace: 'ns1',
      portName: 'p80',
      clusterIP: '172.30.0.41',
      nodePort: 3001,
      externalIPs: ['192.168.99.11'],
      loadBalancerIPs: ['1.2.3.4'],
      externalPolicyLocal: true,
      healthCheckNodePort: 30000,
      clusterEndpoints: [endpoint(POD0, 80), endpoint(POD1, 80, { isLocal: true })],
    }),
  ],
  probed: (nodeIP: string): Target[] => [
    { name: 'ClusterIP', host: '172.30.0.41', port: 80 },
    { name: 'NodePort Local', host: nodeIP, port: 3001, localOnly: true },
  ],
  /** One to each: the ClusterIP's backend is a choice of two to keep, the NodePort's the local one. */
  held: (nodeIP: string): Target[] => ETP_LOCAL.probed(nodeIP),
} satisfies RuleSetServices;

/**
 * Written beside the iptables dumps (iptables-udp-clusterip.restore) and the nftables one
 * (nftables-udp-etp-local.nft): kube-system/kube-dns:dns, a UDP ClusterIP of two endpoints.
 */
export const KUBE_DNS_UDP: RuleSetServices = {
  ports: () => [
    servicePort('kube-dns', {
      namespace: 'kube-system',
      portName: 'dns',
      protocol: 'UDP',
      port: 53,
      clusterIP: '172.30.0.10',
      clusterEndpoints: [endpoint(POD0, 53), endpoint(POD1, 53, { isLocal: true })],
    }),
  ],
  probed: () => [{ name: 'UDP ClusterIP', host: '172.30.0.10', port: 53, proto: 'udp' }],
  /**
   * Two flows (a source port each) to two endpoints: each one's backend is conntrack's to keep; a
   * flow re-balanced by a lost entry keeps its backend by chance, two by one chance in four.
   */
  held: () =>
    [1, 2].map((n) => ({
      name: `UDP flow ${n} to the ClusterIP`,
      host: '172.30.0.10',
      port: 53,
      proto: 'udp',
    })),
};

/**
 * Written beside the nftables dump (nftables-udp-etp-local.nft): ns7/svc7, NodePort 3007 with
 * externalTrafficPolicy Local, its endpoints 10.180.0.1 elsewhere and 10.180.2.1 (LOCAL_POD) here.
 */
export const NFT_LOCAL_NODE_PORT: RuleSetServices = {
  ports: () => [
    servicePort('svc7', {
      namespace: 'ns7',
      portName: 'p80',
      clusterIP: '172.30.0.47',
      nodePort: 3007,
      externalPolicyLocal: true,
      clusterEndpoints: [endpoint(POD0, 80), endpoint(POD1, 80, { isLocal: true })],
    }),
  ],
  probed: (nodeIP) => [{ name: 'NodePort Local', host: nodeIP, port: 3007, localOnly: true }],
  held: (nodeIP) => NFT_LOCAL_NODE_PORT.probed(nodeIP),
};

/** The overall Services with ns1/svc1 as the eTP Local dump's (iptablesOverallWithEtpLocal). */
export const OVERALL_ETP_LOCAL: RuleSetServices = {
  ports: (): ServicePort[] => [
    ...ETP_LOCAL.ports(),
    ...OVERALL.ports().filter((port) => port.namespace !== 'ns1'),
  ],
  /** Overall's ClusterIP (now svc1's of two endpoints) and Cluster NodePort, the Local NodePort. */
  probed: (nodeIP: string): Target[] => [
    ...OVERALL.probed(nodeIP),
    ...ETP_LOCAL.probed(nodeIP).filter((target) => target.localOnly),
  ],
  /** Overall's, and one to the Local NodePort (its local endpoint to keep). */
  held: (nodeIP: string): Target[] => [
    ...OVERALL.held(),
    ...ETP_LOCAL.probed(nodeIP).filter((target) => target.localOnly),
  ],
};

/** KUBE-SERVICES' last rule: a Service's rules in the chain come before it. */
const NODEPORTS_LAST = 'kubernetes service nodeports; NOTE: this must be the last rule in this chain';

/**
 * The overall iptables dump with ns1/svc1 as the eTP Local dump gives it: a node whose kube-proxy
 * serves a NodePort with externalTrafficPolicy Local and a local endpoint beside the overall
 * Services, which no one upstream dump holds (SOURCES.md). The two cannot be loaded one after the
 * other: a restore flushes each chain it names, their ns1/svc1 share a ClusterIP and chains, and
 * overall's ns2/svc2 (Local, its one endpoint elsewhere) the eTP Local one's NodePort, health check
 * node port and load balancer IP. So overall's ns1/svc1 and ns2/svc2 go (their rules, by comment,
 * and their own chains) and the eTP Local dump's ns1/svc1 comes in, each line as that dump has it,
 * before KUBE-SERVICES' last rule or at its table's end; the chains Services share (KUBE-MARK-MASQ,
 * KUBE-POSTROUTING, KUBE-FORWARD, KUBE-FIREWALL) are overall's. kube-proxy writes a Service's rules
 * apart from every other's, so the result is what it writes for the five Services.
 */
export async function iptablesOverallWithEtpLocal(): Promise<Dump> {
  const [overall, etpLocal] = await Promise.all(
    ['iptables-overall.restore', 'iptables-etp-local.restore'].map(async (name) =>
      (await readFile(fixture(name), 'utf8')).split('\n'),
    ),
  );
  const dropped = servicesLines(overall!, ['ns1/svc1', 'ns2/svc2']);
  const added = servicesLines(etpLocal!, ['ns1/svc1']);
  const out: string[] = [];
  for (const table of overall!.filter((line) => line.startsWith('*'))) {
    const base = tableLines(overall!, table).filter((line) => !dropped(line));
    const theirs = tableLines(etpLocal!, table).filter(added);
    const rules = base.filter((line) => line.startsWith('-A '));
    const isServices = (rule: string) => rule.startsWith('-A KUBE-SERVICES ');
    const last = rules.findIndex((rule) => rule.includes(NODEPORTS_LAST));
    rules.splice(last < 0 ? rules.length : last, 0, ...theirs.filter((line) => isServices(line)));
    out.push(
      table,
      ...[...base, ...theirs].filter((line) => line.startsWith(':')),
      ...rules,
      ...theirs.filter((line) => line.startsWith('-A ') && !isServices(line)),
      'COMMIT',
    );
  }
  return { text: `${out.join('\n')}\n` };
}

/**
 * Whether a line of a restore file belongs to one of `services` (`ns/name`): one of their rules (by
 * comment), or a declaration or rule of one of their own chains (SVC, SVL, EXT, FW, SEP), which
 * those rules name.
 */
function servicesLines(lines: readonly string[], services: readonly string[]): (line: string) => boolean {
  const theirs = (line: string) =>
    services.some((name) => line.includes(`--comment ${name}:`) || line.includes(`--comment "${name}:`));
  const rules = new Set(lines.filter(theirs));
  const chains = new Set(
    [...rules].flatMap((rule) => rule.match(/KUBE-(?:SVC|SVL|EXT|FW|SEP)-[A-Z0-9]+/g) ?? []),
  );
  return (line) =>
    rules.has(line) ||
    [...chains].some((chain) => line.startsWith(`:${chain} `) || line.startsWith(`-A ${chain} `));
}

/** The lines of `table` (`*nat`) in a restore file's lines, between it and its COMMIT. */
function tableLines(lines: readonly string[], table: string): string[] {
  const from = lines.indexOf(table);
  return from < 0 ? [] : lines.slice(from + 1, lines.indexOf('COMMIT', from));
}
