// The netfilter rules IPVS mode needs next to the virtual servers (kube-proxy's KUBE-SERVICES,
// KUBE-POSTROUTING, KUBE-PROXY-FIREWALL and KUBE-IPVS-FILTER chains with their ipsets), as one nft
// table per family, `kproxy-ipvs`. Per-service data only goes into sets as elements (one per VIP,
// node port or hairpin endpoint), so the chains are fixed and the cost stays linear.
//
// Hook order matters: IPVS schedules in LOCAL_IN (priority 98) and LOCAL_OUT (-98). The nat chains
// mark at -100, before IPVS rewrites the destination; the filter chains at -110 reject, drop or
// firewall before IPVS sees the packet; postrouting masquerades what IPVS forwarded (the packet
// mark survives the rewrite; net.ipv4.vs.conntrack=1 gives nf_nat a connection to work on).
//
// ClientIP affinity lives here too (affinity.ts): IPVS persistence does not honour the timeout.
//
// externalTrafficPolicy Local keeps the client's source for everyone (no masquerade set entry) and
// its external virtual servers only have local real servers, as in kube-proxy's IPVS mode (which,
// unlike the iptables/nftables modes, has no pod/host short-circuit to all endpoints).
import type { Endpoint, NodeSettings, ProxyState, ServicePort } from '../../contract/proxy-state.ts';
import { trafficDecisions } from '../../contract/traffic-decisions.ts';
import { type FamilySyntax, familySyntax } from '../shared/nft/family-syntax.ts';
import { notLocalTrafficMatch } from '../shared/nft/local-traffic.ts';
import { type FamilyRuleset, RulesetBuilder } from '../shared/nft/ruleset.ts';
import {
  addFirewall,
  FIREWALL_ALLOW,
  FIREWALL_IPS,
  NODEPORT_KEY,
  noEndpointVerdict,
  verdictChains,
  vipKey,
} from '../shared/nft/service-rules.ts';
import { type ChainSpec, fitComment, type SetSpec } from '../shared/nft/transaction.ts';
import { addAffinity, affinityChains, affinitySets, steerRule } from './affinity.ts';
import type { HairpinEndpoints } from './incremental-ports.ts';
import { localEndpointsOf } from './sharing-index.ts';
import type { IpvsFamilyServers } from './virtual-servers.ts';

export const COMPANION_TABLE = 'kproxy-ipvs';

const L4 = 'meta l4proto { tcp, udp, sctp }';

/** The companion table's sets by name (companionSets gives each its type); the firewall's are shared. */
export const COMPANION_SET = {
  boundIps: 'bound-ips',
  virtualServers: 'virtual-servers',
  clusterIps: 'cluster-ips',
  externalIps: 'external-ips',
  nodePortIps: 'nodeport-ips',
  nodePorts: 'nodeports',
  hairpin: 'hairpin',
  noEndpointVips: 'no-endpoint-vips',
  noEndpointNodePorts: 'no-endpoint-nodeports',
} as const;

/** The companion table's sets in one family (what the netlink element writer may write). */
export function companionSets(syntax: FamilySyntax): SetSpec[] {
  const addr = syntax.addrType;
  const vip = `${addr} . inet_proto . inet_service`;
  const port = 'inet_proto . inet_service';
  const set = (name: string, type: string, comment: string, flags?: string[]): SetSpec => ({
    name,
    kind: 'set',
    type: `type ${type}`,
    comment,
    ...(flags && { flags }),
  });
  const map = (name: string, type: string, comment: string): SetSpec => ({
    name,
    kind: 'map',
    type: `type ${type} : verdict`,
    comment,
  });
  return [
    set(COMPANION_SET.boundIps, addr, 'addresses bound to kproxy-ipvs0'),
    set(COMPANION_SET.virtualServers, vip, 'virtual servers on bound addresses'),
    set(COMPANION_SET.clusterIps, vip, 'ClusterIP virtual servers: masquerade off-cluster sources'),
    set(COMPANION_SET.externalIps, vip, 'external and LB IP virtual servers, policy Cluster: masquerade'),
    set(COMPANION_SET.nodePortIps, addr, 'node addresses serving node ports'),
    set(COMPANION_SET.nodePorts, port, 'node ports, policy Cluster: masquerade'),
    set(
      COMPANION_SET.hairpin,
      `${addr} . inet_proto . inet_service . ${addr}`,
      'local endpoint . port . itself',
    ),
    set(FIREWALL_IPS, vip, 'LoadBalancer IPs with source ranges'),
    set(FIREWALL_ALLOW, `${vip} . ${addr}`, 'LoadBalancer IP . proto . port . allowed source', ['interval']),
    map(COMPANION_SET.noEndpointVips, vip, 'VIPs without usable endpoints: reject or drop'),
    map(COMPANION_SET.noEndpointNodePorts, port, 'node ports without usable endpoints: reject or drop'),
    ...affinitySets(syntax),
  ];
}

function chains(syntax: FamilySyntax, node: NodeSettings): ChainSpec[] {
  const ip = syntax.ip;
  const vip = vipKey(syntax);
  const masq = 'jump mark-for-masquerade';
  const notLocal = notLocalTrafficMatch(syntax, node.localDetector);
  const clusterMasq = node.masqueradeAll
    ? [`${vip} @${COMPANION_SET.clusterIps} ${masq}`]
    : notLocal
      ? [`${vip} @${COMPANION_SET.clusterIps} ${notLocal} ${masq}`]
      : [];
  const newConn = (target: string): string => `ct state new jump ${target}`;
  return [
    {
      name: 'nat-prerouting',
      comment: 'mark service traffic from outside for masquerade, steer ClientIP affinity',
      base: { type: 'nat', hook: 'prerouting', priority: '-100' },
      rules: ['jump services', steerRule(syntax)],
    },
    {
      name: 'nat-output',
      comment: 'mark service traffic from this host for masquerade, steer ClientIP affinity',
      base: { type: 'nat', hook: 'output', priority: '-100' },
      rules: ['jump services', steerRule(syntax)],
    },
    {
      name: 'nat-postrouting',
      comment: 'masquerade hairpin and marked traffic',
      base: { type: 'nat', hook: 'postrouting', priority: 'srcnat' },
      rules: [
        `${ip} daddr . ${NODEPORT_KEY} . ${ip} saddr @${COMPANION_SET.hairpin} masquerade`,
        'jump masquerading',
      ],
    },
    {
      name: 'filter-input',
      comment: 'source ranges, no-endpoint checks and unknown ports on bound addresses',
      base: { type: 'filter', hook: 'input', priority: '-110' },
      rules: [newConn('firewall-check'), newConn('endpoints-check'), newConn('ipvs-filter')],
    },
    {
      // The node's own traffic to a LoadBalancer IP is bound by its source ranges too, as in the
      // iptables and nftables modes (kubernetes#119656: kube-proxy's IPVS mode let the node
      // through). Its source is the LB IP itself (bound on the dummy link), which firewall-allow
      // lists when the ranges hold the node's IP.
      name: 'filter-output',
      comment: 'source ranges and no-endpoint checks for traffic from this host',
      base: { type: 'filter', hook: 'output', priority: '-110' },
      rules: [newConn('firewall-check'), newConn('endpoints-check')],
    },
    {
      name: 'services',
      comment: 'which service traffic needs masquerade',
      rules: [
        ...clusterMasq,
        `${vip} @${COMPANION_SET.externalIps} ${masq}`,
        `${ip} daddr @${COMPANION_SET.nodePortIps} ${NODEPORT_KEY} @${COMPANION_SET.nodePorts} ${masq}`,
      ],
    },
    {
      name: 'endpoints-check',
      comment: 'reject or drop traffic to virtual servers without usable endpoints',
      rules: [
        `${vip} vmap @${COMPANION_SET.noEndpointVips}`,
        `${ip} daddr @${COMPANION_SET.nodePortIps} ${NODEPORT_KEY} vmap @${COMPANION_SET.noEndpointNodePorts}`,
      ],
    },
    {
      name: 'ipvs-filter',
      comment: 'reject ports without a virtual server on bound addresses',
      rules: [
        `${ip} daddr @${COMPANION_SET.boundIps} ${L4} ${vip} != @${COMPANION_SET.virtualServers} reject`,
      ],
    },
    ...verdictChains(syntax, node),
    ...affinityChains(syntax),
  ];
}

function addServicePort(
  builder: RulesetBuilder,
  sp: ServicePort,
  node: NodeSettings,
  nodePorts: boolean,
): void {
  const proto = sp.protocol.toLowerCase();
  const d = trafficDecisions(sp);
  const vip = (address: string): string => `${address} . ${proto} . ${sp.port}`;
  const add = (set: string, key: string, what: string, value?: string): void => {
    // A VIP claimed by an earlier service port (in key order) stays with it.
    if (!builder.hasElement(set, key))
      builder.addElement(set, { key, value, comment: fitComment(`${sp.key}${what}`) });
  };
  const clusterKey = vip(sp.clusterIP);
  // No cluster IP ('') when an older Service holds it.
  if (sp.clusterIP !== '' && !builder.hasElement(COMPANION_SET.virtualServers, clusterKey)) {
    add(COMPANION_SET.virtualServers, clusterKey, '');
    add(COMPANION_SET.clusterIps, clusterKey, '');
    if (d.internalVerdict !== undefined)
      add(COMPANION_SET.noEndpointVips, clusterKey, '', noEndpointVerdict(d.internalVerdict));
  }
  const external = [
    ...sp.externalIPs.map((ip) => [ip, ' external IP'] as const),
    ...sp.loadBalancerIPs.map((ip) => [ip, ' load balancer IP'] as const),
  ];
  for (const [address, what] of external) {
    const key = vip(address);
    if (builder.hasElement(COMPANION_SET.virtualServers, key)) continue;
    add(COMPANION_SET.virtualServers, key, what);
    if (d.masqueradesExternal) add(COMPANION_SET.externalIps, key, what);
    if (d.externalVerdict !== undefined)
      add(COMPANION_SET.noEndpointVips, key, what, noEndpointVerdict(d.externalVerdict));
  }
  if (sp.nodePort !== 0 && nodePorts) {
    const key = `${proto} . ${sp.nodePort}`;
    if (
      !builder.hasElement(COMPANION_SET.noEndpointNodePorts, key) &&
      !builder.hasElement(COMPANION_SET.nodePorts, key)
    ) {
      if (d.masqueradesExternal) add(COMPANION_SET.nodePorts, key, ' node port');
      if (d.externalVerdict !== undefined)
        add(COMPANION_SET.noEndpointNodePorts, key, ' node port', noEndpointVerdict(d.externalVerdict));
    }
  }
  addFirewall(builder, sp, d, proto, node);
}

function addHairpin(builder: RulesetBuilder, sp: ServicePort, locals: Iterable<Endpoint>): void {
  const proto = sp.protocol.toLowerCase();
  for (const ep of locals)
    builder.addElement(COMPANION_SET.hairpin, { key: `${ep.ip} . ${proto} . ${ep.port} . ${ep.ip}` });
}

/** The companion table's content for one family; `servers` are the family's virtual servers. */
export function companionRuleset(state: ProxyState, servers: IpvsFamilyServers): FamilyRuleset {
  const syntax = familySyntax(state.family);
  const builder = new RulesetBuilder(syntax.family);
  for (const set of companionSets(syntax)) builder.addSet(set);
  for (const chain of chains(syntax, state.node)) builder.addChain(chain);
  for (const address of servers.nodePortAddresses)
    builder.addElement(COMPANION_SET.nodePortIps, { key: address });
  addPorts(builder, state, state.servicePorts.values(), servers, localEndpointsOf);
  return builder.build();
}

/**
 * The elements (and ClientIP chains) `ports` (some of the state's, in key order) and their
 * `servers` put in the companion table, and no fixed set or chain: the part of the table an
 * incremental plan compares; hairpin elements only of the local endpoints `hairpin` gives a port.
 */
export function companionPortElements(
  state: ProxyState,
  ports: Iterable<ServicePort>,
  servers: IpvsFamilyServers,
  hairpin: HairpinEndpoints,
): FamilyRuleset {
  const builder = new RulesetBuilder(familySyntax(state.family).family, { open: true });
  addPorts(builder, state, ports, servers, hairpin);
  return builder.build();
}

function addPorts(
  builder: RulesetBuilder,
  state: ProxyState,
  ports: Iterable<ServicePort>,
  servers: IpvsFamilyServers,
  hairpin: HairpinEndpoints,
): void {
  for (const address of servers.boundAddresses) builder.addElement(COMPANION_SET.boundIps, { key: address });
  const nodePorts = servers.nodePortAddresses.length > 0;
  for (const sp of ports) {
    addServicePort(builder, sp, state.node, nodePorts);
    addHairpin(builder, sp, hairpin(sp));
  }
  addAffinity(builder, familySyntax(state.family), state, servers.virtualServers.values());
}
