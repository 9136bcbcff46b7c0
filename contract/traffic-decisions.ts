// What a service port's traffic does, decided once for every dataplane (kube-proxy's per-service
// variables in syncProxyRules: hasInternalEndpoints, externalPolicyChain, usesExternalTrafficChain,
// the filter targets, ...). A planner only spells these decisions in its own rules.
//
// Computed when a planner asks, not stored in ProxyState: it is a few comparisons on fields the
// ServicePort already has, and an object per service port kept for the daemon's life would cost
// memory at 30k services for nothing a planner cannot recompute in nanoseconds.
import type { EndpointList, ServicePort } from './proxy-state.ts';

/** Which of the service port's endpoint sets a kind of traffic uses. */
export type EndpointPolicy = 'cluster' | 'local';

/**
 * What traffic with no usable endpoint meets: 'reject' when the service has no endpoint anywhere
 * (the client learns at once), 'drop' when endpoints exist but a Local policy leaves none on this
 * node (kube-proxy's distinction: the service works, just not through this node).
 */
export type NoEndpointVerdict = 'reject' | 'drop';

export interface TrafficDecisions {
  /** ClusterIP traffic: internalTrafficPolicy Local → 'local', else 'cluster'. */
  readonly internalPolicy: EndpointPolicy;
  /** The endpoints ClusterIP traffic is sent to; empty → `internalVerdict`. */
  readonly internalEndpoints: EndpointList;
  /** Set exactly when `internalEndpoints` is empty. */
  readonly internalVerdict: NoEndpointVerdict | undefined;
  /** Traffic from outside to external IPs, LB IPs and node ports: externalTrafficPolicy Local → 'local'. */
  readonly externalPolicy: EndpointPolicy;
  /**
   * The endpoints that outside traffic is sent to; empty → `externalVerdict`. A port without
   * external IPs, LB IPs and node port (of this family) has no external traffic: no endpoints and
   * no verdict.
   */
  readonly externalEndpoints: EndpointList;
  /**
   * Set when there is external traffic and `externalEndpoints` is empty. With 'drop', pod and host
   * traffic is still short-circuited (`shortCircuitsLocalTraffic`): the verdict is for what is not.
   */
  readonly externalVerdict: NoEndpointVerdict | undefined;
  /**
   * Traffic to the external addresses and node port is captured at all (kube-proxy's
   * usesExternalTrafficChain): the port is reachable from outside and some endpoint exists.
   * True even when `externalEndpoints` is empty, for the short-circuit.
   */
  readonly capturesExternal: boolean;
  /** Outside traffic to external addresses is masqueraded: policy Cluster, the endpoint may be elsewhere. */
  readonly masqueradesExternal: boolean;
  /**
   * Policy Local, captured: traffic from local pods to an external address goes to the cluster
   * endpoints (as if it left and came back through the load balancer), and so does the host's
   * own, masqueraded (its source would be the node's or LB's address). The rest keeps its source
   * and uses the local endpoints.
   */
  readonly shortCircuitsLocalTraffic: boolean;
  /** loadBalancerSourceRanges filter traffic to the LB IPs (others are dropped). */
  readonly sourceRangesApply: boolean;
  /** ClientIP affinity timeout in seconds; 0 without affinity. */
  readonly affinitySeconds: number;
}

const NO_ENDPOINTS: EndpointList = [];

/** Reachable through a node port, an external IP or a load balancer IP of this family. */
export function externallyAccessible(
  port: Pick<ServicePort, 'nodePort' | 'externalIPs' | 'loadBalancerIPs'>,
): boolean {
  return port.nodePort !== 0 || port.externalIPs.length > 0 || port.loadBalancerIPs.length > 0;
}

export function trafficDecisions(sp: ServicePort): TrafficDecisions {
  const internalPolicy: EndpointPolicy = sp.internalPolicyLocal ? 'local' : 'cluster';
  const externalPolicy: EndpointPolicy = sp.externalPolicyLocal ? 'local' : 'cluster';
  const external = externallyAccessible(sp);
  const internalEndpoints = endpointsOf(sp, internalPolicy);
  const externalEndpoints = external ? endpointsOf(sp, externalPolicy) : NO_ENDPOINTS;
  const verdict: NoEndpointVerdict = sp.hasEndpoints ? 'drop' : 'reject';
  const capturesExternal = sp.hasEndpoints && external;
  return {
    internalPolicy,
    internalEndpoints,
    internalVerdict: internalEndpoints.length === 0 ? verdict : undefined,
    externalPolicy,
    externalEndpoints,
    externalVerdict: external && externalEndpoints.length === 0 ? verdict : undefined,
    capturesExternal,
    masqueradesExternal: !sp.externalPolicyLocal,
    shortCircuitsLocalTraffic: capturesExternal && sp.externalPolicyLocal,
    sourceRangesApply: sp.loadBalancerIPs.length > 0 && sp.loadBalancerSourceRanges.length > 0,
    affinitySeconds: sp.sessionAffinity?.timeoutSeconds ?? 0,
  };
}

/** The policy's endpoint set; none at all when the service has none anywhere. */
function endpointsOf(sp: ServicePort, policy: EndpointPolicy): EndpointList {
  if (!sp.hasEndpoints) return NO_ENDPOINTS;
  return policy === 'local' ? sp.localEndpoints : sp.clusterEndpoints;
}
