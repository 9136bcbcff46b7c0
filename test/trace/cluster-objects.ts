// Small Kubernetes objects for the trace tests: Services, EndpointSlices and Nodes as the API
// server returns them, so traces run through the model (fallbacks, policies) and not around it.

export const THIS_NODE = 'node-a';
export const OTHER_NODE = 'node-b';

export interface EndpointSpec {
  readonly ip: string;
  readonly node?: string;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
  /** EndpointSlice hints.forNodes (PreferSameNode). */
  readonly forNodes?: readonly string[];
}

export interface ServiceSpec {
  readonly name: string;
  readonly clusterIPs: readonly string[];
  readonly port?: number;
  readonly targetPort?: number;
  readonly protocol?: 'TCP' | 'UDP' | 'SCTP';
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  readonly nodePort?: number;
  readonly externalIPs?: readonly string[];
  readonly loadBalancerIPs?: readonly string[];
  readonly loadBalancerSourceRanges?: readonly string[];
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly internalTrafficPolicy?: 'Cluster' | 'Local';
  readonly affinitySeconds?: number;
  readonly endpoints?: readonly EndpointSpec[];
}

const familyOf = (ip: string) => (ip.includes(':') ? 'IPv6' : 'IPv4');

export function serviceObjects(spec: ServiceSpec): object[] {
  const port = spec.port ?? 80;
  const targetPort = spec.targetPort ?? port;
  const protocol = spec.protocol ?? 'TCP';
  const type =
    spec.type ?? (spec.loadBalancerIPs ? 'LoadBalancer' : spec.nodePort ? 'NodePort' : 'ClusterIP');
  const families = spec.clusterIPs.map(familyOf);
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: spec.name, namespace: 'ns', creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: {
      type,
      clusterIP: spec.clusterIPs[0],
      clusterIPs: spec.clusterIPs,
      ipFamilies: families,
      ipFamilyPolicy: families.length > 1 ? 'RequireDualStack' : 'SingleStack',
      ports: [{ name: 'p', port, targetPort, protocol, ...(spec.nodePort && { nodePort: spec.nodePort }) }],
      ...(spec.externalIPs && { externalIPs: spec.externalIPs }),
      ...(spec.loadBalancerSourceRanges && { loadBalancerSourceRanges: spec.loadBalancerSourceRanges }),
      ...(type !== 'ClusterIP' && { externalTrafficPolicy: spec.externalTrafficPolicy ?? 'Cluster' }),
      internalTrafficPolicy: spec.internalTrafficPolicy ?? 'Cluster',
      sessionAffinity: spec.affinitySeconds ? 'ClientIP' : 'None',
      ...(spec.affinitySeconds && {
        sessionAffinityConfig: { clientIP: { timeoutSeconds: spec.affinitySeconds } },
      }),
    },
    status: { loadBalancer: { ingress: (spec.loadBalancerIPs ?? []).map((ip) => ({ ip })) } },
  };
  const slices = [...new Set(families)].map((family) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    addressType: family,
    metadata: {
      name: `${spec.name}-${family.toLowerCase()}`,
      namespace: 'ns',
      labels: { 'kubernetes.io/service-name': spec.name },
    },
    endpoints: (spec.endpoints ?? [])
      .filter((endpoint) => familyOf(endpoint.ip) === family)
      .map((endpoint) => ({
        addresses: [endpoint.ip],
        conditions: {
          ready: endpoint.ready ?? true,
          serving: endpoint.serving ?? endpoint.ready ?? true,
          terminating: endpoint.terminating ?? false,
        },
        nodeName: endpoint.node ?? THIS_NODE,
        ...(endpoint.forNodes && { hints: { forNodes: endpoint.forNodes.map((name) => ({ name })) } }),
      })),
    ports: [{ name: 'p', port: targetPort, protocol }],
  }));
  return [service, ...slices];
}

export function nodeObject(name: string, addresses: readonly string[], podCIDRs: readonly string[]): object {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name },
    spec: { podCIDR: podCIDRs[0], podCIDRs },
    status: { addresses: addresses.map((address) => ({ type: 'InternalIP', address })) },
  };
}

export function objectList(items: readonly object[]): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}
