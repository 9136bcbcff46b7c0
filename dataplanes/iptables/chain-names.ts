// Names of the iptables chains kproxy owns. Everything is prefixed KPROXY- so it can never collide
// with an upstream kube-proxy (KUBE-*). Per-service chain names are hashed like kube-proxy's
// (sha256 → base32 → 16 characters), because iptables chain names are limited to 28 characters.
import { hash } from 'node:crypto';
import type { Endpoint, ServicePort } from '../../contract/proxy-state.ts';

export const SERVICES_CHAIN = 'KPROXY-SERVICES';
export const EXTERNAL_SERVICES_CHAIN = 'KPROXY-EXTERNAL-SERVICES';
export const NODEPORTS_CHAIN = 'KPROXY-NODEPORTS';
export const POSTROUTING_CHAIN = 'KPROXY-POSTROUTING';
export const MARK_MASQ_CHAIN = 'KPROXY-MARK-MASQ';
export const FORWARD_CHAIN = 'KPROXY-FORWARD';
export const FIREWALL_CHAIN = 'KPROXY-PROXY-FIREWALL';
/** kube-proxy's (and kubelet's) KUBE-FIREWALL: the martian-packet guard localhost node ports need. */
export const LOCALNET_FIREWALL_CHAIN = 'KPROXY-FIREWALL';
export const CANARY_CHAIN = 'KPROXY-PROXY-CANARY';
/**
 * The chains of KPROXY-SERVICES's dispatch tree, keyed by the low bits of the destination address
 * (service-dispatch.ts): KPROXY-SVB-1-1F at the first level, KPROXY-SVB-2-3FF at the second. Sorting
 * before KPROXY-SVC-, the chains the leaves jump to, as ENDPOINT_CHAIN_PREFIX explains.
 */
export const SERVICE_DISPATCH_CHAIN_PREFIX = 'KPROXY-SVB-';
/** Only used when the local-traffic detector has several values (see local-traffic.ts). */
export const MASQ_NOT_LOCAL_CHAIN = 'KPROXY-MASQ-NOT-LOCAL';
/**
 * Not a chain: kube-proxy's nfacct object counting the packets accepted for localhost NodePorts,
 * under its name, which its metric kubeproxy_iptables_localhost_nodeports_accepted_packets_total
 * reads (nfacct objects are the namespace's, not a table's; kube-proxy never deletes it either).
 */
export const LOCALHOST_NODEPORTS_COUNTER = 'localhost_nps_accepted_pkts';

/**
 * The per-endpoint chains (kube-proxy's KUBE-SEP-*). Named to sort after KPROXY-SVC- and
 * KPROXY-SVL-, the chains that jump to them: iptables-nft-restore --noflush (1.8.9) keeps every
 * chain name an input mentions in a sorted linked list, walked from its head for each rule's chain
 * and jump target, so a chain with n jumps cost O(n²) (a 100,000-endpoint Service never finished)
 * unless it sorts before its targets and they come in descending order (endpointChoiceRules).
 */
export const ENDPOINT_CHAIN_PREFIX = 'KPROXY-TEP-';

const SERVICE_CHAIN_PREFIXES = [
  SERVICE_DISPATCH_CHAIN_PREFIX,
  'KPROXY-SVC-',
  'KPROXY-SVL-',
  'KPROXY-EXT-',
  'KPROXY-FW-',
  ENDPOINT_CHAIN_PREFIX,
];

/**
 * A per-service-port or per-endpoint chain, or a chain of KPROXY-SERVICES's dispatch tree: the ones
 * that come and go with services, and that a large restore carries in parts (restore-chunks.ts).
 */
export function isServiceChain(chain: string): boolean {
  return SERVICE_CHAIN_PREFIXES.some((prefix) => chain.startsWith(prefix));
}

/** Not a chain either: kube-proxy's nfacct object counting the INVALID packets KPROXY-FORWARD drops. */
export const CT_STATE_INVALID_COUNTER = 'ct_state_invalid_dropped_pkts';
/** Every chain name kproxy may own, top-level or per service. */
export function isKproxyChain(chain: string): boolean {
  return chain.startsWith('KPROXY-');
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The first 16 characters of base32(sha256(text)), i.e. the first 80 bits (kube-proxy's chain hash). */
export function hash16(text: string): string {
  const digest = hash('sha256', text, 'buffer');
  let out = '';
  let bits = 0;
  let value = 0;
  for (let i = 0; out.length < 16; i++) {
    value = (value << 8) | digest[i]!;
    bits += 8;
    while (bits >= 5 && out.length < 16) {
      bits -= 5;
      out += BASE32[(value >>> bits) & 31];
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

/** "ip:port", or "[ip]:port" for IPv6: kube-proxy's endpoint string and the DNAT target. */
export function endpointAddress(endpoint: Endpoint): string {
  return endpoint.ip.includes(':') ? `[${endpoint.ip}]:${endpoint.port}` : `${endpoint.ip}:${endpoint.port}`;
}

export interface ServiceChainNames {
  /** Cluster traffic policy: all usable endpoints. */
  readonly cluster: string;
  /** Local traffic policy: node-local endpoints. */
  readonly local: string;
  /** External destinations (NodePort, externalIPs, LoadBalancer IPs). */
  readonly external: string;
  /** LoadBalancer source-range firewall. */
  readonly firewall: string;
}

export function serviceChainNames(sp: ServicePort): ServiceChainNames {
  const hash = hash16(sp.key + sp.protocol.toLowerCase());
  return {
    cluster: `KPROXY-SVC-${hash}`,
    local: `KPROXY-SVL-${hash}`,
    external: `KPROXY-EXT-${hash}`,
    firewall: `KPROXY-FW-${hash}`,
  };
}

export function endpointChainName(sp: ServicePort, endpoint: Endpoint): string {
  return `${ENDPOINT_CHAIN_PREFIX}${hash16(sp.key + sp.protocol.toLowerCase() + endpointAddress(endpoint))}`;
}
