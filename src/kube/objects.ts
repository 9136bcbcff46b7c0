// The parts of Kubernetes objects that kproxy reads. Field names and shapes follow the v1 API
// (core/v1 Service and Node, discovery.k8s.io/v1 EndpointSlice, networking.k8s.io/v1 ServiceCIDR) so that a decoded API response
// or `kubectl -o json` output fits as is. Everything else the API sends is dropped at decode time:
// the model keeps every Service, and a daemon watches tens of thousands.

export interface ObjectMeta {
  readonly name: string;
  readonly namespace?: string;
  readonly resourceVersion?: string;
  /**
   * Seconds since the epoch (RFC 3339 as decoded, fractions kept): kept for Services only, where
   * the older one keeps an address two of them claim. A number, not the API's string: an integer
   * this size is held in the object itself, the string took 40 bytes (~1.1 MiB at 30k Services).
   */
  readonly creationTimestamp?: number;
  /** Only the labels kproxy reads (READ_LABELS). */
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly deletionTimestamp?: string;
}

export interface ServicePortSpec {
  readonly name?: string;
  readonly protocol?: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly nodePort?: number;
  readonly appProtocol?: string;
}

export interface ServiceSpec {
  readonly type?: string;
  readonly clusterIP?: string;
  readonly clusterIPs?: readonly string[];
  readonly ipFamilies?: readonly string[];
  readonly ipFamilyPolicy?: string;
  readonly ports?: readonly ServicePortSpec[];
  readonly externalIPs?: readonly string[];
  readonly externalName?: string;
  readonly loadBalancerIP?: string;
  readonly loadBalancerSourceRanges?: readonly string[];
  readonly externalTrafficPolicy?: string;
  readonly internalTrafficPolicy?: string;
  readonly healthCheckNodePort?: number;
  readonly sessionAffinity?: string;
  readonly sessionAffinityConfig?: { readonly clientIP?: { readonly timeoutSeconds?: number } };
  readonly trafficDistribution?: string;
  readonly allocateLoadBalancerNodePorts?: boolean;
}

export interface LoadBalancerIngress {
  readonly ip?: string;
  readonly hostname?: string;
  readonly ipMode?: string;
}

export interface ServiceStatus {
  readonly loadBalancer?: { readonly ingress?: readonly LoadBalancerIngress[] };
}

export interface Service {
  readonly kind: 'Service';
  readonly metadata: ObjectMeta;
  readonly spec: ServiceSpec;
  readonly status?: ServiceStatus;
}

export interface EndpointConditions {
  readonly ready?: boolean | null;
  readonly serving?: boolean | null;
  readonly terminating?: boolean | null;
}

export interface EndpointHints {
  readonly forZones?: readonly { readonly name: string }[];
  readonly forNodes?: readonly { readonly name: string }[];
}

export interface EndpointSliceEndpoint {
  readonly addresses: readonly string[];
  readonly conditions?: EndpointConditions;
  readonly nodeName?: string;
  readonly zone?: string;
  readonly hints?: EndpointHints;
}

export interface EndpointSlicePort {
  readonly name?: string;
  readonly protocol?: string;
  readonly port?: number;
}

export interface EndpointSlice {
  readonly kind: 'EndpointSlice';
  readonly metadata: ObjectMeta;
  readonly addressType: string;
  readonly endpoints?: readonly EndpointSliceEndpoint[];
  readonly ports?: readonly EndpointSlicePort[];
}

export interface Node {
  readonly kind: 'Node';
  readonly metadata: ObjectMeta;
  readonly spec?: {
    readonly podCIDR?: string;
    readonly podCIDRs?: readonly string[];
    readonly taints?: readonly { readonly key: string; readonly value?: string; readonly effect: string }[];
  };
  readonly status?: { readonly addresses?: readonly { readonly type: string; readonly address: string }[] };
}

/**
 * networking.k8s.io/v1 ServiceCIDR (MultiCIDRServiceAllocator, GA 1.33): the ranges cluster IPs
 * are allocated from. Traffic to an address in them that no Service holds is dropped (nftables).
 */
export interface ServiceCIDR {
  readonly kind: 'ServiceCIDR';
  readonly metadata: ObjectMeta;
  readonly spec: { readonly cidrs: readonly string[] };
}

export type KubeObject = Service | EndpointSlice | Node | ServiceCIDR;

/** The least an informer's store keeps of an object: what keys it and tells whether it changed. */
export interface ObjectHead {
  readonly kind: KubeObject['kind'];
  readonly metadata: ObjectMeta;
}

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** Services and slices with this label belong to another proxy. */
export const SERVICE_PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
/** kproxy's own: with --service-proxy-name NAME, a Service labelled NAME is served too (src/model/proxy-labels.ts). */
export const HANDOVER_LABEL = 'kproxy/handover';
/** Headless services carry this label on their slices. */
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';
/** The EndpointSlice annotation that network_programming_duration_seconds is measured from. */
export const LAST_CHANGE_TRIGGER_TIME_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';
/** Node labels used by topology-aware routing. */
export const ZONE_LABEL = 'topology.kubernetes.io/zone';
/**
 * The labels kproxy reads; decoding drops the others. A Service's labels can be many, and a
 * change of a Node label kproxy does not read must not look like a change of the node.
 */
export const READ_LABELS: readonly string[] = [
  SERVICE_NAME_LABEL,
  SERVICE_PROXY_NAME_LABEL,
  HANDOVER_LABEL,
  HEADLESS_LABEL,
  ZONE_LABEL,
];
