// This node's identity and proxy options → NodeSettings per IP family, with kube-proxy's rules
// for node IPs, local-traffic detection and --nodeport-addresses.

import ipaddr from 'ipaddr.js';
import { canonicalCIDR, canonicalIP, familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { Problem } from '../../contract/base/problem.ts';
import type { LocalTrafficDetector, NodeSettings } from '../../contract/proxy-state.ts';
import type { Node } from '../kube/objects.ts';

export type DetectLocalMode = LocalTrafficDetector['mode'];

export interface ProxyOptions {
  /** hostname-override: endpoints with this nodeName are local. */
  readonly nodeName: string;
  /** --service-proxy-name: serve only the Services labelled with it (proxy-labels.ts). */
  readonly serviceProxyName?: string;
  /** From flags; when empty, taken from the Node object (InternalIP first, then ExternalIP). */
  readonly nodeIPs: readonly string[];
  readonly detectLocalMode: DetectLocalMode;
  /** For ClusterCIDR. */
  readonly clusterCIDRs: readonly string[];
  /** For BridgeInterface. */
  readonly bridgeInterface?: string;
  /** For InterfaceNamePrefix. */
  readonly interfaceNamePrefix?: string;
  readonly masqueradeAll: boolean;
  /** Default 14. */
  readonly masqueradeBit: number;
  /** CIDRs and/or the words 'primary', 'localhost' and 'all'; empty = all local addresses. */
  readonly nodePortAddresses: readonly string[];
  /**
   * kube-proxy's iptables.localhostNodePorts, for the modes that honour it (iptables); absent =
   * off. Served only where the node port addresses include 127.0.0.1 (NodeSettings).
   */
  readonly localhostNodePorts?: boolean;
  /**
   * kube-proxy's nfacct counter of packets to localhost NodePorts (localhost_nps_accepted_pkts)
   * exists: kproxy run created it, or render assumes a kernel that has nfacct. Absent = no counter.
   */
  readonly localhostNodePortsCounter?: boolean;
  /**
   * kube-proxy's nfacct counter of the INVALID packets the iptables mode drops
   * (ct_state_invalid_dropped_pkts) exists, as localhostNodePortsCounter. Absent = no counter.
   */
  readonly invalidDropsCounter?: boolean;
  /** nf_conntrack_tcp_be_liberal is set (--conntrack-tcp-be-liberal); absent = not set. */
  readonly conntrackTCPLiberal?: boolean;
  /** --service-cluster-ip-range: the service CIDRs when the cluster has no ServiceCIDR object. */
  readonly serviceCIDRs?: readonly string[];
}

export type NodeSettingsByFamily = { readonly [F in IPFamily]?: NodeSettings };

/** Problems with options are reported against this name. */
const OPTIONS = 'kproxy options';

/**
 * Settings for each family this node serves. A family is served when a node IP of that family is
 * known; a node with no known IP at all is treated as single-stack IPv4 (kube-proxy's fallback to
 * 127.0.0.1), so dry-runs without --node-ip still render something. The service CIDRs
 * (service-cidrs.ts) are split by family.
 */
export function nodeSettingsByFamily(
  options: ProxyOptions,
  node: Node | undefined,
  problems: Problem[],
  serviceCIDRs: readonly string[] = [],
): NodeSettingsByFamily {
  const ipsByFamily = nodeIPsByFamily(options, node, problems);
  const families: IPFamily[] = (['IPv4', 'IPv6'] as const).filter((f) => ipsByFamily[f].length > 0);
  if (families.length === 0) families.push('IPv4');
  const clusterCIDRs = validCIDRs(options.clusterCIDRs, 'clusterCIDRs', problems);
  const nodePortAddresses = validNodePortAddresses(options.nodePortAddresses, problems);
  const podCIDRs = node?.spec?.podCIDRs ?? (node?.spec?.podCIDR ? [node.spec.podCIDR] : []);
  checkDetectorInputs(options, node, problems);

  const result: { [F in IPFamily]?: NodeSettings } = {};
  for (const family of families) {
    const nodeIPs = ipsByFamily[family];
    const addresses = nodePortAddressesOf(nodePortAddresses, family, nodeIPs[0]);
    const localhostNodePorts =
      options.localhostNodePorts === true && family === 'IPv4' && servesLoopbackIPv4(addresses);
    result[family] = {
      nodeName: options.nodeName,
      nodeIPs,
      localDetector: localDetector(options, family, clusterCIDRs, podCIDRs),
      masqueradeAll: options.masqueradeAll,
      masqueradeBit: options.masqueradeBit,
      nodePortAddresses: addresses,
      localhostNodePorts,
      ...(localhostNodePorts &&
        options.localhostNodePortsCounter === true && { localhostNodePortsCounted: true }),
      ...(options.invalidDropsCounter === true && { invalidDropsCounted: true }),
      ...(options.conntrackTCPLiberal === true && { conntrackTCPLiberal: true }),
      serviceCIDRs: serviceCIDRs.filter((cidr) => familyOf(cidr) === family),
    };
  }
  return result;
}

/**
 * Whether NodePorts are served on 127.0.0.1 (and so route_localnet is needed): kube-proxy's
 * iptables proxier turns localhostNodePorts off unless --nodeport-addresses includes an IPv4
 * loopback address. IPv6 has no route_localnet: never there.
 */
export function servesLocalhostNodePorts(options: ProxyOptions): boolean {
  if (options.localhostNodePorts !== true) return false;
  const addresses = validNodePortAddresses(options.nodePortAddresses, []);
  return servesLoopbackIPv4(nodePortAddressesOf(addresses, 'IPv4', ANY_NODE_IP));
}

/** Stands for this node's primary IPv4 address before it is known: some address, never loopback. */
const ANY_NODE_IP = '192.0.2.1';

const LOOPBACK_IPV4 = ipaddr.parse('127.0.0.1');

/**
 * Every local address, or a CIDR holding 127.0.0.1: the loopback address lo carries, which is what
 * kube-proxy's list of the node's interface addresses finds in such a CIDR.
 */
function servesLoopbackIPv4(addresses: NodeSettings['nodePortAddresses']): boolean {
  return (
    addresses === 'all' ||
    addresses.some((cidr) => familyOf(cidr) === 'IPv4' && LOOPBACK_IPV4.match(ipaddr.parseCIDR(cidr)))
  );
}

function nodeIPsByFamily(
  options: ProxyOptions,
  node: Node | undefined,
  problems: Problem[],
): Record<IPFamily, string[]> {
  const byFamily: Record<IPFamily, string[]> = { IPv4: [], IPv6: [] };
  const add = (ip: string): void => {
    const list = byFamily[familyOf(ip)];
    if (!list.includes(ip)) list.push(ip);
  };
  if (options.nodeIPs.length > 0) {
    options.nodeIPs.forEach((text, i) => {
      const ip = canonicalIP(text);
      if (ip === undefined)
        problems.push({ object: OPTIONS, reason: `nodeIPs[${i}]: "${text}" is not an IP address` });
      else add(ip);
    });
    return byFamily;
  }
  const addresses = node?.status?.addresses ?? [];
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const address of addresses) if (address.type === type) add(address.address);
  }
  return byFamily;
}

function validCIDRs(texts: readonly string[], field: string, problems: Problem[]): string[] {
  const cidrs: string[] = [];
  texts.forEach((text, i) => {
    const cidr = canonicalCIDR(text.trim());
    if (cidr === undefined)
      problems.push({ object: OPTIONS, reason: `${field}[${i}]: "${text}" is not a CIDR` });
    else if (!cidrs.includes(cidr)) cidrs.push(cidr);
  });
  return cidrs;
}

/** kube-proxy 1.37's keywords; each stands for an address or CIDR per family. */
const NODE_PORT_KEYWORDS = new Set(['primary', 'localhost', 'all']);

/** CIDRs, and the keywords kept as words: 'primary' means a different IP per family. */
function validNodePortAddresses(texts: readonly string[], problems: Problem[]): string[] {
  const result: string[] = [];
  texts.forEach((text, i) => {
    if (NODE_PORT_KEYWORDS.has(text)) {
      if (!result.includes(text)) result.push(text);
      return;
    }
    const cidr = canonicalCIDR(text.trim());
    if (cidr === undefined) {
      problems.push({
        object: OPTIONS,
        reason: `nodePortAddresses[${i}]: "${text}" is not a CIDR, "primary", "localhost" or "all"`,
      });
    } else if (!result.includes(cidr)) result.push(cidr);
  });
  return result;
}

/**
 * kube-proxy's NodePortAddresses for one family (the keywords combine with CIDRs since 1.37):
 * 'all' is every local address; 'primary' is this family's primary node IP (not loopback) as a
 * /32 or /128; 'localhost' is 127.0.0.0/8 or ::1/128; CIDRs of the other family are dropped; and
 * when nothing of this family is left, or a zero CIDR is given, node ports are served on every
 * local address.
 */
function nodePortAddressesOf(
  addresses: readonly string[],
  family: IPFamily,
  primaryIP: string | undefined,
): NodeSettings['nodePortAddresses'] {
  const cidrs: string[] = [];
  for (const address of addresses) {
    if (address === 'all') return 'all';
    let cidr: string | undefined = address;
    if (address === 'localhost') cidr = family === 'IPv4' ? '127.0.0.0/8' : '::1/128';
    if (address === 'primary') {
      const loopback = primaryIP === '::1' || primaryIP?.startsWith('127.');
      cidr = primaryIP === undefined || loopback ? undefined : `${primaryIP}/${family === 'IPv4' ? 32 : 128}`;
    }
    if (cidr === undefined || familyOf(cidr) !== family || cidrs.includes(cidr)) continue;
    if (cidr.endsWith('/0')) return 'all';
    cidrs.push(cidr);
  }
  return cidrs.length === 0 ? 'all' : cidrs;
}

function localDetector(
  options: ProxyOptions,
  family: IPFamily,
  clusterCIDRs: readonly string[],
  podCIDRs: readonly string[],
): LocalTrafficDetector {
  // kube-proxy uses a no-op detector for a family that has no CIDR to detect with.
  switch (options.detectLocalMode) {
    case 'ClusterCIDR': {
      const cidrs = clusterCIDRs.filter((cidr) => familyOf(cidr) === family);
      return cidrs.length > 0 ? { mode: 'ClusterCIDR', cidrs } : { mode: 'None' };
    }
    case 'NodeCIDR': {
      const cidrs = podCIDRs.filter((cidr) => familyOf(cidr) === family);
      return cidrs.length > 0 ? { mode: 'NodeCIDR', cidrs } : { mode: 'None' };
    }
    case 'BridgeInterface':
      return options.bridgeInterface
        ? { mode: 'BridgeInterface', interfaces: [options.bridgeInterface] }
        : { mode: 'None' };
    case 'InterfaceNamePrefix':
      return options.interfaceNamePrefix
        ? { mode: 'InterfaceNamePrefix', prefixes: [options.interfaceNamePrefix] }
        : { mode: 'None' };
    case 'None':
      return { mode: 'None' };
  }
}

/** A detect-local mode without what it detects with is a configuration mistake worth saying. */
function checkDetectorInputs(options: ProxyOptions, node: Node | undefined, problems: Problem[]): void {
  const missing: Partial<Record<DetectLocalMode, [boolean, string]>> = {
    BridgeInterface: [!options.bridgeInterface, 'bridgeInterface is not set'],
    InterfaceNamePrefix: [!options.interfaceNamePrefix, 'interfaceNamePrefix is not set'],
    NodeCIDR: [
      node === undefined || (!node.spec?.podCIDR && (node.spec?.podCIDRs?.length ?? 0) === 0),
      "this node's Node object with spec.podCIDRs is not known",
    ],
  };
  const check = missing[options.detectLocalMode];
  if (check?.[0]) {
    problems.push({
      object: OPTIONS,
      reason: `detectLocalMode ${options.detectLocalMode}: ${check[1]}; local traffic is not detected`,
    });
  }
}
