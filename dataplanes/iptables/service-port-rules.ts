// One service port → iptables rules, following upstream kube-proxy's iptables proxier
// (pkg/proxy/iptables/proxier.go, syncProxyRules) rule for rule, with KPROXY-* chain names.
//
// A service port contributes lines to the shared top-level chains (sharedRules) and owns its own
// nat chains (ownChains: SVC/SVL/EXT/FW/TEP). The two are separate so an incremental plan can
// rewrite the shared chains without rendering every service's own chains.
import type { Endpoint, EndpointList, ServicePort } from '../../contract/proxy-state.ts';
import {
  type NoEndpointVerdict,
  type TrafficDecisions,
  trafficDecisions,
} from '../../contract/traffic-decisions.ts';
import { cidrContains } from '../shared/cidr.ts';
import {
  EXTERNAL_SERVICES_CHAIN,
  endpointAddress,
  endpointChainName,
  FIREWALL_CHAIN,
  LOCALHOST_NODEPORTS_COUNTER,
  MARK_MASQ_CHAIN,
  MASQ_NOT_LOCAL_CHAIN,
  NODEPORTS_CHAIN,
  SERVICES_CHAIN,
  type ServiceChainNames,
  serviceChainNames,
} from './chain-names.ts';
import type { FamilyContext } from './family-context.ts';
import { negateMatch } from './local-traffic.ts';

/** `-m comment --comment TEXT`, quoted when it has spaces (as iptables-save prints it). */
export function comment(text: string): string {
  return text.includes(' ') ? `-m comment --comment "${text}"` : `-m comment --comment ${text}`;
}

/** The model's traffic decisions for a service port, spelled as iptables chains and targets. */
interface Decisions {
  readonly sp: ServicePort;
  readonly traffic: TrafficDecisions;
  readonly names: ServiceChainNames;
  /** "-m tcp -p tcp" */
  readonly proto: string;
  /** The SVC or SVL chain of each kind of traffic's policy. */
  readonly internalChain: string;
  readonly externalPolicyChain: string;
  /** Source ranges apply, and there is an EXT chain for the accepted traffic to go on to. */
  readonly usesFirewallChain: boolean;
  readonly loadBalancerChain: string;
  /** REJECT/DROP and its comment for traffic that has no endpoint. */
  readonly internalFilter: NoEndpointFilter | undefined;
  readonly externalFilter: NoEndpointFilter | undefined;
}

interface NoEndpointFilter {
  readonly target: string;
  readonly comment: string;
}

function decide(sp: ServicePort): Decisions {
  const names = serviceChainNames(sp);
  const protocol = sp.protocol.toLowerCase();
  const traffic = trafficDecisions(sp);
  const usesFirewallChain = traffic.sourceRangesApply && traffic.capturesExternal;
  return {
    sp,
    traffic,
    names,
    proto: `-m ${protocol} -p ${protocol}`,
    internalChain: names[traffic.internalPolicy],
    externalPolicyChain: names[traffic.externalPolicy],
    usesFirewallChain,
    loadBalancerChain: usesFirewallChain ? names.firewall : names.external,
    internalFilter: noEndpointFilter(sp, traffic.internalVerdict),
    externalFilter: noEndpointFilter(sp, traffic.externalVerdict),
  };
}

function noEndpointFilter(
  sp: ServicePort,
  verdict: NoEndpointVerdict | undefined,
): NoEndpointFilter | undefined {
  if (verdict === undefined) return undefined;
  return verdict === 'reject'
    ? { target: 'REJECT', comment: `${sp.key} has no endpoints` }
    : { target: 'DROP', comment: `${sp.key} has no local endpoints` };
}

/**
 * A service address rule of KPROXY-SERVICES in the nat table: its destination, which places it in
 * the dispatch tree (service-dispatch.ts), and the rule without `-A CHAIN`.
 */
export interface ServiceAddressRule {
  readonly destination: string;
  readonly spec: string;
}

/** Lines a service port adds to the shared chains, per table and chain. */
export interface SharedRules {
  readonly nat: { readonly services: ServiceAddressRule[]; readonly nodePorts: string[] };
  readonly filter: {
    readonly services: string[];
    readonly externalServices: string[];
    readonly nodePorts: string[];
    readonly firewall: string[];
  };
}

export function emptySharedRules(): SharedRules {
  return {
    nat: { services: [], nodePorts: [] },
    filter: { services: [], externalServices: [], nodePorts: [], firewall: [] },
  };
}

/**
 * Appends the service port's lines for the shared chains to `out` (kept in kube-proxy's order).
 * `countLocalhost`: its node port's packets to 127.0.0.0/8 are counted first (ProxyState's
 * localhostNodePortsCounted).
 */
export function appendSharedRules(sp: ServicePort, out: SharedRules, countLocalhost: boolean): void {
  const d = decide(sp);
  const { nat, filter } = out;
  const dport = `--dport ${sp.port}`;

  if (sp.clusterIP === '') {
    // No cluster IP: an older Service holds it (src/model/address-claims.ts).
  } else if (d.internalFilter === undefined) {
    nat.services.push({
      destination: sp.clusterIP,
      spec: `${comment(`${sp.key} cluster IP`)} ${d.proto} -d ${sp.clusterIP} ${dport} -j ${d.internalChain}`,
    });
  } else {
    filter.services.push(
      `-A ${SERVICES_CHAIN} ${comment(d.internalFilter.comment)} ${d.proto} -d ${sp.clusterIP} ${dport} -j ${d.internalFilter.target}`,
    );
  }

  for (const ip of sp.externalIPs) {
    if (d.traffic.capturesExternal) {
      nat.services.push({
        destination: ip,
        spec: `${comment(`${sp.key} external IP`)} ${d.proto} -d ${ip} ${dport} -j ${d.names.external}`,
      });
    }
    if (d.externalFilter) {
      filter.externalServices.push(
        `-A ${EXTERNAL_SERVICES_CHAIN} ${comment(d.externalFilter.comment)} ${d.proto} -d ${ip} ${dport} -j ${d.externalFilter.target}`,
      );
    }
  }

  for (const ip of sp.loadBalancerIPs) {
    if (d.traffic.capturesExternal) {
      nat.services.push({
        destination: ip,
        spec: `${comment(`${sp.key} loadbalancer IP`)} ${d.proto} -d ${ip} ${dport} -j ${d.loadBalancerChain}`,
      });
    }
    if (d.usesFirewallChain) {
      filter.firewall.push(
        `-A ${FIREWALL_CHAIN} ${comment(`${sp.key} traffic not accepted by ${d.names.firewall}`)} ${d.proto} -d ${ip} ${dport} -j DROP`,
      );
    }
  }
  if (d.externalFilter) {
    for (const ip of sp.loadBalancerIPs) {
      filter.externalServices.push(
        `-A ${EXTERNAL_SERVICES_CHAIN} ${comment(d.externalFilter.comment)} ${d.proto} -d ${ip} ${dport} -j ${d.externalFilter.target}`,
      );
    }
  }

  if (sp.nodePort !== 0) {
    if (d.traffic.capturesExternal) {
      if (countLocalhost) {
        nat.nodePorts.push(
          `-A ${NODEPORTS_CHAIN} ${comment(sp.key)} ${d.proto} -d 127.0.0.0/8 --dport ${sp.nodePort} -m nfacct --nfacct-name ${LOCALHOST_NODEPORTS_COUNTER} -j ${d.names.external}`,
        );
      }
      nat.nodePorts.push(
        `-A ${NODEPORTS_CHAIN} ${comment(sp.key)} ${d.proto} --dport ${sp.nodePort} -j ${d.names.external}`,
      );
    }
    if (d.externalFilter) {
      filter.externalServices.push(
        `-A ${EXTERNAL_SERVICES_CHAIN} ${comment(d.externalFilter.comment)} -m addrtype --dst-type LOCAL ${d.proto} --dport ${sp.nodePort} -j ${d.externalFilter.target}`,
      );
    }
  }

  if (sp.healthCheckNodePort !== 0) {
    // Accepted whether or not this node has local endpoints: the health check answers either way.
    filter.nodePorts.push(
      `-A ${NODEPORTS_CHAIN} ${comment(`${sp.key} health check node port`)} -m tcp -p tcp --dport ${sp.healthCheckNodePort} -j ACCEPT`,
    );
  }
}

/**
 * The nat chains a service port owns, with their rules. Every chain jumps only to chains after it
 * (FW → EXT → SVC/SVL → TEP), so a restore split into parts can create them back to front.
 */
export function ownChains(sp: ServicePort, ctx: FamilyContext): Map<string, string[]> {
  const chains = policyChains(sp, ctx);
  for (const [chain, rules] of endpointChains(sp, ctx, locallyReachableEndpoints(sp)))
    chains.set(chain, rules);
  return chains;
}

/** The chains of ownChains that are not per endpoint: FW, EXT, SVC and SVL. */
export function policyChains(
  sp: ServicePort,
  ctx: FamilyContext,
  choices: { readonly cluster: boolean; readonly local: boolean } = { cluster: true, local: true },
): Map<string, string[]> {
  const d = decide(sp);
  const chains = new Map<string, string[]>();
  if (d.usesFirewallChain) chains.set(d.names.firewall, firewallChainRules(d, ctx));
  if (d.traffic.capturesExternal) chains.set(d.names.external, externalChainRules(d, ctx));
  // A policy chain exists when its endpoint set does (the model leaves a set no traffic uses empty).
  // Without its `choices`, it holds everything but the endpoint choice (diffServiceChains in planner.ts).
  if (sp.clusterEndpoints.length > 0)
    chains.set(
      d.names.cluster,
      choices.cluster ? endpointChoiceRules(d, ctx, d.names.cluster, sp.clusterEndpoints) : [],
    );
  if (sp.localEndpoints.length > 0)
    chains.set(
      d.names.local,
      choices.local ? endpointChoiceRules(d, ctx, d.names.local, sp.localEndpoints) : [],
    );
  // Internal traffic from outside the cluster is masqueraded first thing in its policy chain.
  if (d.traffic.internalEndpoints.length > 0)
    chains.get(d.internalChain)!.unshift(...internalMasqueradeRules(d, ctx));
  return chains;
}

/**
 * The per-endpoint chains of `endpoints` (some of locallyReachableEndpoints). A chain's name and
 * rules depend on the endpoint's address and on the service port's key, protocol and affinity
 * timeout (and ctx.largeCluster) only: sameEndpointChains says when two renders would agree.
 */
export function endpointChains(
  sp: ServicePort,
  ctx: FamilyContext,
  endpoints: EndpointList,
): Map<string, string[]> {
  const d = decide(sp);
  const chains = new Map<string, string[]>();
  for (const endpoint of endpoints) {
    const chain = endpointChainName(sp, endpoint);
    chains.set(chain, endpointChainRules(d, ctx, chain, endpoint));
  }
  return chains;
}

/** Whether an endpoint at one address gets the same chain under `a` as under `b` (same ctx). */
export function sameEndpointChains(a: ServicePort, b: ServicePort): boolean {
  return (
    a.key === b.key &&
    a.protocol === b.protocol &&
    trafficDecisions(a).affinitySeconds === trafficDecisions(b).affinitySeconds
  );
}

function internalMasqueradeRules(d: Decisions, ctx: FamilyContext): string[] {
  const { sp } = d;
  if (sp.clusterIP === '') return [];
  const match = `-A ${d.internalChain} ${comment(`${sp.key} cluster IP`)} ${d.proto} -d ${sp.clusterIP} --dport ${sp.port}`;
  if (ctx.node.masqueradeAll) return [`${match} -j ${MARK_MASQ_CHAIN}`];
  // Off-cluster traffic to a VIP (e.g. a static route to the service range) may bounce off-node.
  const [only, ...more] = ctx.localMatches;
  if (only === undefined) return [];
  if (more.length === 0) return [`${match} ${negateMatch(only)} -j ${MARK_MASQ_CHAIN}`];
  return [`${match} -j ${MASQ_NOT_LOCAL_CHAIN}`];
}

function externalChainRules(d: Decisions, ctx: FamilyContext): string[] {
  const { sp, names, traffic } = d;
  const chain = names.external;
  const rules: string[] = [];
  if (traffic.masqueradesExternal) {
    rules.push(
      `-A ${chain} ${comment(`masquerade traffic for ${sp.key} external destinations`)} -j ${MARK_MASQ_CHAIN}`,
    );
  } else if (traffic.shortCircuitsLocalTraffic && sp.clusterEndpoints.length > 0) {
    // Pod traffic, then the host's (masqueraded), to the Cluster policy chain.
    for (const match of ctx.localMatches) {
      rules.push(
        `-A ${chain} ${comment(`pod traffic for ${sp.key} external destinations`)} ${match} -j ${names.cluster}`,
      );
    }
    rules.push(
      `-A ${chain} ${comment(`masquerade LOCAL traffic for ${sp.key} external destinations`)} -m addrtype --src-type LOCAL -j ${MARK_MASQ_CHAIN}`,
      `-A ${chain} ${comment(`route LOCAL traffic for ${sp.key} external destinations`)} -m addrtype --src-type LOCAL -j ${names.cluster}`,
    );
  }
  if (traffic.externalEndpoints.length > 0) rules.push(`-A ${chain} -j ${d.externalPolicyChain}`);
  return rules;
}

function firewallChainRules(d: Decisions, ctx: FamilyContext): string[] {
  const { sp, names } = d;
  const prefix = `-A ${names.firewall} ${comment(`${sp.key} loadbalancer IP`)}`;
  const rules = sp.loadBalancerSourceRanges.map((cidr) => `${prefix} -s ${cidr} -j ${names.external}`);
  // A VIP-like LB IP is often local, so the node's own requests arrive with the LB IP as source.
  const nodeIP = ctx.node.nodeIPs[0];
  if (nodeIP !== undefined && sp.loadBalancerSourceRanges.some((cidr) => cidrContains(cidr, nodeIP))) {
    for (const ip of sp.loadBalancerIPs) rules.push(`${prefix} -s ${ip} -j ${names.external}`);
  }
  // Not accepted above → not DNATed → dropped by KPROXY-PROXY-FIREWALL in the filter table.
  rules.push(
    `-A ${names.firewall} ${comment(`other traffic to ${sp.key} will be dropped by ${FIREWALL_CHAIN}`)}`,
  );
  return rules;
}

/** kube-proxy's probability for rule i of n: 1/(n-i), printed with %0.10f. */
export function probability(remaining: number): string {
  return (1 / remaining).toFixed(10);
}

/** The comment of a per-endpoint rule, with its leading space; none in large-cluster mode. */
function endpointNote(ctx: FamilyContext, text: string): string {
  return ctx.largeCluster ? '' : ` ${comment(text)}`;
}

function endpointChoiceRules(
  d: Decisions,
  ctx: FamilyContext,
  chain: string,
  endpoints: EndpointList,
): string[] {
  const { sp } = d;
  const rules: string[] = [];
  // In descending chain-name order (any order is an equally fair choice): iptables-nft-restore
  // then finds each target at the head of its list of names, and a restore of n endpoints stays
  // linear (ENDPOINT_CHAIN_PREFIX).
  const targets = endpoints
    .map((endpoint) => ({
      sep: endpointChainName(sp, endpoint),
      note: endpointNote(ctx, `${sp.key} -> ${endpointAddress(endpoint)}`),
    }))
    .sort((a, b) => (a.sep < b.sep ? 1 : a.sep > b.sep ? -1 : 0));
  const seconds = d.traffic.affinitySeconds;
  if (seconds > 0) {
    // These checks name every endpoint chain a second time in one input, which iptables-nft-restore
    // finds by walking past every smaller name: O(n²), but under 1 s of user time at 20,000 endpoints
    // against the kernel's own O(n²) for xt_recent (each rule's list looked up by name in a list of
    // all of them, at load and per packet: 14 s of system time for one change). Doing the endpoint
    // chain's work in place instead (hairpin mark, DNAT with --update) avoided the walk but took a
    // third recent rule per endpoint, and the kernel's time grew more (docs/benchmarks-log.md).
    for (const { sep, note } of targets) {
      rules.push(`-A ${chain}${note} -m recent --name ${sep} --rcheck --seconds ${seconds} --reap -j ${sep}`);
    }
  }
  const n = targets.length;
  targets.forEach(({ sep, note }, i) => {
    const random = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n - i)}` : '';
    rules.push(`-A ${chain}${note}${random} -j ${sep}`);
  });
  return rules;
}

function endpointChainRules(d: Decisions, ctx: FamilyContext, chain: string, endpoint: Endpoint): string[] {
  const { sp } = d;
  const prefix = `-A ${chain}${endpointNote(ctx, sp.key)}`;
  const affinity = d.traffic.affinitySeconds > 0 ? ` -m recent --name ${chain} --set` : '';
  return [
    // Hairpin: a pod reaching itself through the service must see the node as the source.
    `${prefix} -s ${endpoint.ip} -j ${MARK_MASQ_CHAIN}`,
    `${prefix}${affinity} ${d.proto} -j DNAT --to-destination ${endpointAddress(endpoint)}`,
  ];
}

/** Cluster endpoints plus any local-only ones: every endpoint that gets a TEP chain. */
function locallyReachableEndpoints(sp: ServicePort): Endpoint[] {
  const seen = new Set(sp.clusterEndpoints.map(endpointAddress));
  return [...sp.clusterEndpoints, ...sp.localEndpoints.filter((e) => !seen.has(endpointAddress(e)))];
}
