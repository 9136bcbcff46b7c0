// ProxyState: the contract between the model and every dataplane.
//
// Plain, immutable data with stable keys. It holds every decision a dataplane needs (which
// endpoints serve Cluster and Local traffic after the ready/serving/terminating fallback and
// topology, masquerade and local-traffic settings), so that iptables, nftables and IPVS implement
// the same semantics from the same decisions and never see a Kubernetes object. What a service
// port's traffic does with its endpoints is trafficDecisions (traffic-decisions.ts).

import type { IPFamily } from './base/ip-family.ts';
import type { ReadonlyList } from './chunked-list.ts';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

/** "namespace/name:port/PROTOCOL", e.g. "kube-system/kube-dns:53/UDP". Unique per service port. */
export type ServicePortKey = string;

export interface Endpoint {
  /** Canonical text form of the address (lower-case, compressed for IPv6). */
  readonly ip: string;
  readonly port: number;
  /** The endpoint runs on this node. */
  readonly isLocal: boolean;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
}

/**
 * A port's endpoints: an array, or for a port with thousands a ChunkedList whose next version
 * shares all but the chunks a change touched (chunked-list.ts). Read through ReadonlyList.
 */
export type EndpointList = ReadonlyList<Endpoint>;

export interface SessionAffinity {
  readonly timeoutSeconds: number;
}

export interface ServicePort {
  readonly key: ServicePortKey;
  readonly namespace: string;
  readonly name: string;
  /** spec.ports[].name; "" for an unnamed port. Endpoints are matched to it. */
  readonly portName: string;
  readonly protocol: Protocol;
  readonly port: number;
  /**
   * This family's ClusterIP; '' when an older Service holds this address:port/protocol. No two
   * service ports share an address:port/protocol (cluster, external or LoadBalancer IP) or a node
   * port/protocol: the model resolves such conflicts (address-claims.ts).
   */
  readonly clusterIP: string;
  /** 0 when the service has no node port (or an older Service holds it). */
  readonly nodePort: number;
  readonly externalIPs: readonly string[];
  /** LoadBalancer ingress IPs of this family (ipMode Proxy and hostname-only entries excluded). */
  readonly loadBalancerIPs: readonly string[];
  /** CIDRs of this family allowed to reach the LoadBalancer IPs; empty means everyone. */
  readonly loadBalancerSourceRanges: readonly string[];
  /** Present when sessionAffinity is ClientIP. */
  readonly sessionAffinity?: SessionAffinity;
  /** externalTrafficPolicy: Local, on a service that is reachable from outside. */
  readonly externalPolicyLocal: boolean;
  /** internalTrafficPolicy: Local. */
  readonly internalPolicyLocal: boolean;
  /** 0 when none. Only set for LoadBalancer services with externalTrafficPolicy Local. */
  readonly healthCheckNodePort: number;
  /**
   * Endpoints for traffic under the Cluster policy: ready ones (after topology filtering), or
   * serving+terminating ones when none is ready. Empty when no traffic uses the Cluster policy.
   * Sorted by ip then port.
   */
  readonly clusterEndpoints: EndpointList;
  /**
   * Node-local endpoints for traffic under the Local policy: ready local ones, or local
   * serving+terminating ones when none is ready. Empty when no traffic uses the Local policy.
   * Sorted by ip then port.
   */
  readonly localEndpoints: EndpointList;
  /**
   * Some endpoint anywhere can serve this port. False → traffic is REJECTed; true with no
   * usable endpoint for a policy → that traffic is DROPped (kube-proxy's distinction).
   */
  readonly hasEndpoints: boolean;
  /**
   * Serving endpoints neither list above holds (terminating while others are ready, outside this
   * node's topology, remote under a Local-only policy): no new flow goes to them, but the UDP flows
   * they already serve are kept, as kube-proxy's conntrack reconciler keeps them. Absent when none.
   */
  readonly otherServingEndpoints?: EndpointList;
}

/** How traffic from local pods is recognised (kube-proxy's detectLocalMode). */
export type LocalTrafficDetector =
  | { readonly mode: 'ClusterCIDR'; readonly cidrs: readonly string[] }
  | { readonly mode: 'NodeCIDR'; readonly cidrs: readonly string[] }
  | { readonly mode: 'BridgeInterface'; readonly interfaces: readonly string[] }
  | { readonly mode: 'InterfaceNamePrefix'; readonly prefixes: readonly string[] }
  | { readonly mode: 'None' };

export interface NodeSettings {
  readonly nodeName: string;
  /** This node's IPs of this family, primary first. */
  readonly nodeIPs: readonly string[];
  readonly localDetector: LocalTrafficDetector;
  readonly masqueradeAll: boolean;
  /** The bit of the packet mark that asks for masquerade (kube-proxy's --iptables-masquerade-bit, 14). */
  readonly masqueradeBit: number;
  /** Where NodePorts are served: every local address, or the local addresses in these CIDRs. */
  readonly nodePortAddresses: 'all' | readonly string[];
  /**
   * NodePorts are also served on 127.0.0.1 (kube-proxy's iptables.localhostNodePorts, IPv4 only,
   * with route_localnet, masqueraded; nodePortAddresses include 127.0.0.1). Absent = not served:
   * only the iptables mode sets it, as only kube-proxy's iptables proxier serves them this way.
   */
  readonly localhostNodePorts?: boolean;
  /**
   * With localhostNodePorts: the packets accepted for them are also counted in kube-proxy's nfacct
   * object localhost_nps_accepted_pkts (kubeproxy_iptables_localhost_nodeports_accepted_packets_total).
   * Absent where the kernel has no nfacct (kproxy run leaves the rule out, as kube-proxy).
   */
  readonly localhostNodePortsCounted?: boolean;
  /**
   * The INVALID packets the iptables mode drops are counted in kube-proxy's nfacct object
   * ct_state_invalid_dropped_pkts (kubeproxy_iptables_ct_state_invalid_dropped_packets_total).
   * Absent where the kernel has no nfacct, as localhostNodePortsCounted.
   */
  readonly invalidDropsCounted?: boolean;
  /**
   * nf_conntrack_tcp_be_liberal is set: conntrack no longer marks out-of-window TCP segments
   * INVALID, so the iptables mode keeps them instead of dropping every INVALID packet, as
   * kube-proxy (kubernetes#117924). Absent = not set.
   */
  readonly conntrackTCPLiberal?: boolean;
  /**
   * How the nftables mode picks an endpoint without session affinity: absent = at random (numgen);
   * 'source' = by a hash of the client address (IPVS's sh: one client, one endpoint while the
   * endpoint set is unchanged); 'consistent' = the client address hashed into a Maglev table of the
   * endpoints (IPVS's mh: a client keeps its endpoint across most endpoint changes). Only the
   * nftables mode sets it (its --ipvs-scheduler counterpart).
   */
  readonly endpointHash?: 'source' | 'consistent';
  /**
   * The cluster's service CIDRs of this family, sorted (ServiceCIDR objects, else the
   * --service-cluster-ip-range fallback): traffic to an address in them that no Service holds is
   * dropped (nftables, as kube-proxy). Cluster-wide rather than the node's, but like the node's
   * settings it is fixed for every service port, and a change re-plans everything.
   */
  readonly serviceCIDRs: readonly string[];
}

export interface ProxyState {
  readonly family: IPFamily;
  readonly node: NodeSettings;
  /** Every service port of this family, in key order. */
  readonly servicePorts: ReadonlyMap<ServicePortKey, ServicePort>;
}

/** Both families; a single-stack node has no state for the other. */
export interface DualStackState {
  readonly IPv4?: ProxyState;
  readonly IPv6?: ProxyState;
}
