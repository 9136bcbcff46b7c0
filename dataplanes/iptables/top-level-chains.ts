// The shared top-level chains (KPROXY-SERVICES, KPROXY-NODEPORTS, ...) of one family: the fixed
// rules plus every service port's contributions, following kube-proxy's syncProxyRules.
import ipaddr from 'ipaddr.js';
import type { ProxyState } from '../../contract/proxy-state.ts';
import { cidrContains } from '../shared/cidr.ts';
import {
  CT_STATE_INVALID_COUNTER,
  EXTERNAL_SERVICES_CHAIN,
  FIREWALL_CHAIN,
  FORWARD_CHAIN,
  LOCALNET_FIREWALL_CHAIN,
  MARK_MASQ_CHAIN,
  MASQ_NOT_LOCAL_CHAIN,
  NODEPORTS_CHAIN,
  POSTROUTING_CHAIN,
  SERVICES_CHAIN,
} from './chain-names.ts';
import type { FamilyContext } from './family-context.ts';
import type { Chains } from './plan-types.ts';
import { serviceDispatch } from './service-dispatch.ts';
import { appendSharedRules, comment, emptySharedRules } from './service-port-rules.ts';

export interface TopLevelChains {
  readonly filter: Chains;
  readonly nat: Chains;
}

export function topLevelChains(state: ProxyState, ctx: FamilyContext): TopLevelChains {
  const shared = emptySharedRules();
  const counted = countsLocalhostNodePorts(state);
  for (const sp of state.servicePorts.values()) appendSharedRules(sp, shared, counted);
  const filter = new Map<string, readonly string[]>([
    [SERVICES_CHAIN, shared.filter.services],
    [EXTERNAL_SERVICES_CHAIN, shared.filter.externalServices],
    [FORWARD_CHAIN, forwardRules(ctx)],
    [NODEPORTS_CHAIN, shared.filter.nodePorts],
    [FIREWALL_CHAIN, shared.filter.firewall],
    [LOCALNET_FIREWALL_CHAIN, localnetFirewallRules(ctx)],
  ]);
  const dispatch = serviceDispatch(ctx.family, shared.nat.services);
  const nat = new Map<string, readonly string[]>([
    [SERVICES_CHAIN, [...dispatch.head, ...nodePortJumps(ctx)]],
    ...dispatch.chains,
    [NODEPORTS_CHAIN, shared.nat.nodePorts],
    [POSTROUTING_CHAIN, postroutingRules(ctx)],
    [MARK_MASQ_CHAIN, [`-A ${MARK_MASQ_CHAIN} -j MARK --or-mark ${ctx.mark}`]],
  ]);
  if (ctx.localMatches.length > 1) nat.set(MASQ_NOT_LOCAL_CHAIN, masqueradeNotLocalRules(ctx));
  return { filter, nat };
}

function postroutingRules(ctx: FamilyContext): string[] {
  const mark = `${ctx.mark}/${ctx.mark}`;
  return [
    `-A ${POSTROUTING_CHAIN} -m mark ! --mark ${mark} -j RETURN`,
    // Clear the mark so a packet that traverses the stack again is not masqueraded twice.
    `-A ${POSTROUTING_CHAIN} -j MARK --xor-mark ${ctx.mark}`,
    `-A ${POSTROUTING_CHAIN} ${comment('kubernetes service traffic requiring SNAT')} -j MASQUERADE --random-fully`,
  ];
}

function forwardRules(ctx: FamilyContext): string[] {
  return [
    // INVALID packets would otherwise reset connections (kubernetes#74839); a liberal conntrack
    // marks no out-of-window segment INVALID, and kube-proxy then keeps them (kubernetes#117924).
    ...(ctx.node.conntrackTCPLiberal === true
      ? []
      : [`-A ${FORWARD_CHAIN} -m conntrack --ctstate INVALID${invalidDropsCount(ctx)} -j DROP`]),
    // Forward what we marked for masquerade, even when FORWARD's policy is not ACCEPT.
    `-A ${FORWARD_CHAIN} ${comment('kubernetes forwarding rules')} -m mark --mark ${ctx.mark}/${ctx.mark} -j ACCEPT`,
    `-A ${FORWARD_CHAIN} ${comment('kubernetes forwarding conntrack rule')} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
  ];
}

/**
 * Serving node ports on 127.0.0.1 needs route_localnet, which lets the kernel route packets from
 * outside to 127.0.0.0/8 (CVE-2020-8558, kubernetes#90259): drop those unless conntrack knows them
 * or they were DNATed (kube-proxy's and kubelet's KUBE-FIREWALL rule).
 */
function localnetFirewallRules(ctx: FamilyContext): string[] {
  if (!servesLocalhost(ctx)) return [];
  return [
    `-A ${LOCALNET_FIREWALL_CHAIN} ${comment('block incoming localnet connections')} -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
  ];
}

/** Where the kernel has kube-proxy's nfacct object, the dropped INVALID packets are counted in it. */
function invalidDropsCount(ctx: FamilyContext): string {
  return ctx.node.invalidDropsCounted === true ? ` -m nfacct --nfacct-name ${CT_STATE_INVALID_COUNTER}` : '';
}

/** Packets to localhost node ports are counted in kube-proxy's nfacct object (IPv4 only). */
export function countsLocalhostNodePorts(state: ProxyState): boolean {
  return state.family === 'IPv4' && state.node.localhostNodePortsCounted === true;
}

/** route_localnet is IPv4's: ::1 is never a node port address, whatever the state says. */
function servesLocalhost(ctx: FamilyContext): boolean {
  return ctx.family === 'IPv4' && ctx.node.localhostNodePorts === true;
}

const NODEPORTS_NOTE = comment(
  'kubernetes service nodeports; NOTE: this must be the last rule in this chain',
);

/**
 * The tail call to KPROXY-NODEPORTS: last in KPROXY-SERVICES. Loopback destinations only when
 * localhost node ports are served (IPv4: 127.0.0.1 through route_localnet; never ::1).
 */
function nodePortJumps(ctx: FamilyContext): string[] {
  const { nodePortAddresses, nodeIPs } = ctx.node;
  const localhost = servesLocalhost(ctx);
  if (nodePortAddresses === 'all') {
    const loopback = ctx.family === 'IPv6' ? ' ! -d ::1/128' : localhost ? '' : ' ! -d 127.0.0.0/8';
    return [
      `-A ${SERVICES_CHAIN} ${NODEPORTS_NOTE} -m addrtype --dst-type LOCAL${loopback} -j ${NODEPORTS_CHAIN}`,
    ];
  }
  const addresses = nodeIPs.filter(
    (ip) =>
      ipaddr.parse(ip).range() !== 'loopback' && nodePortAddresses.some((cidr) => cidrContains(cidr, ip)),
  );
  // The node's interface addresses in the CIDRs, as kube-proxy lists them: lo's is 127.0.0.1.
  if (localhost) addresses.push('127.0.0.1');
  return addresses.map((ip) => `-A ${SERVICES_CHAIN} ${NODEPORTS_NOTE} -d ${ip} -j ${NODEPORTS_CHAIN}`);
}

/** With several local-traffic matches, "not local" needs a chain: local traffic returns early. */
function masqueradeNotLocalRules(ctx: FamilyContext): string[] {
  return [
    ...ctx.localMatches.map((match) => `-A ${MASQ_NOT_LOCAL_CHAIN} ${match} -j RETURN`),
    `-A ${MASQ_NOT_LOCAL_CHAIN} -j ${MARK_MASQ_CHAIN}`,
  ];
}
