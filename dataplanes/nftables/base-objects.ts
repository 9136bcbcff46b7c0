// The fixed part of a family's table: every set and map, and every chain that does not depend on
// a service. Per-service data only ever goes into these maps as elements, so the number of
// chains and sets stays constant as services come and go (see docs/architecture.md).
import type { NodeSettings } from '../../contract/proxy-state.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import { localTrafficMatches, notLocalTrafficMatch } from '../shared/nft/local-traffic.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { NODEPORT_KEY, verdictChains, vipKey } from '../shared/nft/service-rules.ts';
import type { ChainSpec, SetSpec } from '../shared/nft/transaction.ts';
import { affinityChains, affinitySets, RECORD_HOST_CONNECTIONS } from './affinity.ts';
import { countedChains } from './endpoint-dispatch.ts';
import {
  CLUSTER,
  countsMap,
  type DispatchTarget,
  L4_PROTOCOLS,
  LOCAL,
  NODEPORT_CLUSTER,
  NODEPORT_LOCAL,
  SETS,
} from './sets.ts';

/** Every set and map of a family's table (they depend on the family only; names: sets.ts). */
export function familySets(syntax: FamilySyntax): SetSpec[] {
  const vip = `${syntax.addrType} . inet_proto . inet_service`;
  const port = 'inet_proto . inet_service';
  const map = (name: string, type: string, comment: string): SetSpec => ({
    name,
    kind: 'map',
    type,
    comment,
  });
  // One endpoint map per protocol: with `meta l4proto . th dport` in a typeof key, nft 1.0.6
  // cannot read the map's rules and elements back from the kernel ("conflicting protocols"), which
  // breaks every later incremental transaction. `tcp dport` etc. round-trip cleanly.
  const backends = ({ backendsMap, nodePort }: DispatchTarget, comment: string): SetSpec[] =>
    L4_PROTOCOLS.map((proto) => {
      const key = nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
      return map(
        `${backendsMap}-${proto}`,
        `typeof ${key} . numgen random mod 1 : ${syntax.ip} daddr . ${proto} dport`,
        `${proto}: ${comment}`,
      );
    });
  // A key's count, written into the header's port (endpoint-dispatch.ts): typed as the port.
  const counts = (target: DispatchTarget, comment: string): SetSpec[] =>
    L4_PROTOCOLS.map((proto) =>
      map(
        countsMap(target, proto),
        `type ${target.nodePort ? '' : `${syntax.addrType} . `}inet_service : inet_service`,
        `${proto}: ${comment}`,
      ),
    );
  return [
    map(SETS.serviceIps.name, `type ${vip} : verdict`, 'service VIP . proto . port -> traffic policy chain'),
    map(
      SETS.serviceNodePorts.name,
      `type ${port} : verdict`,
      'node port proto . port -> traffic policy chain',
    ),
    {
      name: SETS.nodePortIps.name,
      kind: 'set',
      type: `type ${syntax.addrType}`,
      comment: 'addresses serving node ports',
    },
    map(CLUSTER.dispatchMap, `type ${vip} : verdict`, 'VIP . proto . port -> chain picking one endpoint'),
    map(LOCAL.dispatchMap, `type ${vip} : verdict`, 'VIP . proto . port -> chain picking one local endpoint'),
    map(NODEPORT_CLUSTER.dispatchMap, `type ${port} : verdict`, 'node port -> chain picking one endpoint'),
    map(
      NODEPORT_LOCAL.dispatchMap,
      `type ${port} : verdict`,
      'node port -> chain picking one local endpoint',
    ),
    ...counts(CLUSTER, 'VIP . port -> endpoint count'),
    ...counts(LOCAL, 'VIP . port -> local endpoint count'),
    ...counts(NODEPORT_CLUSTER, 'node port -> endpoint count'),
    ...counts(NODEPORT_LOCAL, 'node port -> local endpoint count'),
    ...backends(CLUSTER, 'VIP . port . index -> endpoint'),
    ...backends(LOCAL, 'VIP . port . index -> local endpoint'),
    ...backends(NODEPORT_CLUSTER, 'node port . index -> endpoint'),
    ...backends(NODEPORT_LOCAL, 'node port . index -> local endpoint'),
    {
      name: SETS.hairpin.name,
      kind: 'set',
      type: `type ${syntax.addrType} . ${syntax.addrType}`,
      comment: 'local endpoint . itself: a pod reaching itself through a service',
    },
    {
      name: SETS.firewallIps.name,
      kind: 'set',
      type: `type ${vip}`,
      comment: 'LoadBalancer IPs with source ranges',
    },
    {
      name: SETS.firewallAllow.name,
      kind: 'set',
      type: `type ${vip} . ${syntax.addrType}`,
      flags: ['interval'],
      comment: 'LoadBalancer IP . proto . port . allowed source range',
    },
    map(SETS.noEndpointServices.name, `type ${vip} : verdict`, 'VIPs without usable endpoints: drop'),
    {
      name: SETS.noEndpointServicesReject.name,
      kind: 'set',
      type: `type ${vip}`,
      comment: 'VIPs without any endpoint: reject',
    },
    {
      name: SETS.noEndpointNodePortsReject.name,
      kind: 'set',
      type: `type ${port}`,
      comment: 'node ports without any endpoint: reject',
    },
    {
      name: SETS.clusterIps.name,
      kind: 'set',
      type: `type ${syntax.addrType}`,
      comment: 'every ClusterIP served: other ports of them are rejected',
    },
    // Filled by the live dataplane only (a nonce per full sync), so not part of any plan.
    {
      name: SETS.canary.name,
      kind: 'set',
      type: 'type mark',
      comment: 'nonce of the last full sync: intact check',
    },
    map(SETS.noEndpointNodePorts.name, `type ${port} : verdict`, 'node ports without usable endpoints: drop'),
    ...affinitySets(syntax),
  ];
}

function chain(name: string, comment: string, rules: readonly string[]): ChainSpec {
  return { name, comment, rules };
}

function baseChains(syntax: FamilySyntax): ChainSpec[] {
  const ip = syntax.ip;
  const newConn = (target: string): string => `ct state new jump ${target}`;
  return [
    {
      name: 'nat-prerouting',
      comment: 'DNAT service traffic from outside',
      base: { type: 'nat', hook: 'prerouting', priority: 'dstnat' },
      rules: ['jump services'],
    },
    {
      // nft 1.0.6 does not accept the name "dstnat" in the output hook; it is -100 there too.
      name: 'nat-output',
      comment: 'DNAT service traffic from this host',
      base: { type: 'nat', hook: 'output', priority: '-100' },
      rules: ['jump services'],
    },
    {
      name: 'nat-postrouting',
      comment: 'masquerade hairpin and marked traffic',
      base: { type: 'nat', hook: 'postrouting', priority: 'srcnat' },
      rules: [
        `ct status dnat ${ip} saddr . ${ip} daddr @${SETS.hairpin.name} masquerade`,
        'jump masquerading',
      ],
    },
    // Filter checks see the address before DNAT (priority dstnat - 10), as in kube-proxy, except
    // the host's no-endpoint check (below); reject is only allowed in input/forward/output on
    // older kernels.
    {
      name: 'filter-prerouting',
      comment: 'LoadBalancer source ranges',
      base: { type: 'filter', hook: 'prerouting', priority: '-110' },
      rules: [newConn('firewall-check')],
    },
    {
      name: 'filter-input',
      comment: 'no-endpoint checks for traffic to this host',
      base: { type: 'filter', hook: 'input', priority: '-110' },
      rules: [newConn('nodeport-endpoints-check'), newConn('service-endpoints-check')],
    },
    // Forwarded and host traffic has been DNATed by the time the ClusterIP check sees it (the
    // forward hook comes after prerouting; post-DNAT output), so what still goes to a service
    // address matched no service port: kube-proxy's cluster-ips-check, hooked the same two ways.
    {
      name: 'filter-forward',
      comment: 'no-endpoint and ClusterIP checks for routed traffic',
      base: { type: 'filter', hook: 'forward', priority: '-110' },
      rules: [newConn('service-endpoints-check'), newConn('cluster-ips-check')],
    },
    {
      name: 'filter-output',
      comment: 'source range checks for traffic from this host',
      base: { type: 'filter', hook: 'output', priority: '-110' },
      rules: [newConn('firewall-check')],
    },
    // For traffic from this host the no-endpoint check runs after nat-output (dstnat + 10, as
    // kube-proxy's filter-output-post-dnat): host traffic to an eTP Local external address is
    // short-circuited to the cluster endpoints there, and must not meet the DROP first.
    {
      name: 'filter-output-post-dnat',
      comment: 'no-endpoint and ClusterIP checks, ClientIP recording for traffic from this host, after DNAT',
      base: { type: 'filter', hook: 'output', priority: '-90' },
      rules: [newConn('service-endpoints-check'), newConn('cluster-ips-check'), RECORD_HOST_CONNECTIONS],
    },
    ...affinityChains(syntax),
  ];
}

/** Matches a destination that serves node ports. */
function nodePortDestination(syntax: FamilySyntax, node: NodeSettings): string {
  return node.nodePortAddresses === 'all'
    ? `fib daddr type local ${syntax.ip} daddr != ${syntax.loopback}`
    : `${syntax.ip} daddr @${SETS.nodePortIps.name}`;
}

function policyChains(syntax: FamilySyntax, node: NodeSettings): ChainSpec[] {
  const vip = vipKey(syntax);
  const masq = 'jump mark-for-masquerade';
  const notLocal = notLocalTrafficMatch(syntax, node.localDetector);
  const clusterMasq = node.masqueradeAll ? [masq] : notLocal ? [`${notLocal} ${masq}`] : [];
  // eTP Local: pod traffic short-circuits to all endpoints (as if it left and came back through
  // the load balancer), host traffic too but masqueraded; the rest keeps its source and goes
  // to local endpoints only.
  const localPolicy = (key: string, cluster: string, local: string): string[] => [
    ...localTrafficMatches(syntax, node.localDetector).map((m) => `${m} ${key} vmap @${cluster}`),
    `fib saddr type local ${masq}`,
    `fib saddr type local ${key} vmap @${cluster}`,
    `${key} vmap @${local}`,
  ];
  return [
    chain('services', 'dispatch service VIPs and node ports to their policy chain', [
      `${vip} vmap @${SETS.serviceIps.name}`,
      `${nodePortDestination(syntax, node)} ${NODEPORT_KEY} vmap @${SETS.serviceNodePorts.name}`,
    ]),
    chain('cluster-ip', 'ClusterIP traffic: masquerade off-cluster sources', [
      ...clusterMasq,
      `${vip} vmap @${CLUSTER.dispatchMap}`,
    ]),
    chain('external', 'external traffic, policy Cluster: masquerade', [
      masq,
      `${vip} vmap @${CLUSTER.dispatchMap}`,
    ]),
    chain(
      'external-local',
      'external traffic, policy Local',
      localPolicy(vip, CLUSTER.dispatchMap, LOCAL.dispatchMap),
    ),
    chain('nodeport', 'node port traffic, policy Cluster: masquerade', [
      masq,
      `${NODEPORT_KEY} vmap @${NODEPORT_CLUSTER.dispatchMap}`,
    ]),
    chain(
      'nodeport-local',
      'node port traffic, policy Local',
      localPolicy(NODEPORT_KEY, NODEPORT_CLUSTER.dispatchMap, NODEPORT_LOCAL.dispatchMap),
    ),
  ];
}

/**
 * kube-proxy's cluster-ips-check, run after DNAT: a ClusterIP on a port or protocol it does not
 * serve is rejected; any other address of the service CIDRs (one no Service holds) is dropped.
 */
function clusterIPsCheck(syntax: FamilySyntax, node: NodeSettings): ChainSpec {
  const unallocated =
    node.serviceCIDRs.length > 0 ? [`${syntax.ip} daddr { ${node.serviceCIDRs.join(', ')} } drop`] : [];
  return chain('cluster-ips-check', 'ClusterIP ports not served: reject; unallocated service IPs: drop', [
    `${syntax.ip} daddr @${SETS.clusterIps.name} reject`,
    ...unallocated,
  ]);
}

function checkChains(syntax: FamilySyntax, node: NodeSettings): ChainSpec[] {
  const vip = vipKey(syntax);
  const nodePort = `${nodePortDestination(syntax, node)} ${NODEPORT_KEY}`;
  return [
    clusterIPsCheck(syntax, node),
    chain('service-endpoints-check', 'reject or drop traffic to VIPs without usable endpoints', [
      `${vip} @${SETS.noEndpointServicesReject.name} reject`,
      `${vip} vmap @${SETS.noEndpointServices.name}`,
    ]),
    chain('nodeport-endpoints-check', 'reject or drop traffic to node ports without usable endpoints', [
      `${nodePort} @${SETS.noEndpointNodePortsReject.name} reject`,
      `${nodePort} vmap @${SETS.noEndpointNodePorts.name}`,
    ]),
    // The no-endpoint REJECT is a rule here (a set), not the shared reject-chain (service-port.ts).
    ...verdictChains(syntax, node).filter((c) => c.name !== 'reject-chain'),
  ];
}

/** Adds every set, map and fixed chain of the family's table. */
export function addBaseObjects(builder: RulesetBuilder, syntax: FamilySyntax, node: NodeSettings): void {
  for (const set of familySets(syntax)) builder.addSet(set);
  const chains = [
    ...baseChains(syntax),
    ...policyChains(syntax, node),
    ...checkChains(syntax, node),
    ...countedChains(syntax, node),
  ];
  for (const c of chains) {
    builder.addChain(c);
  }
}
