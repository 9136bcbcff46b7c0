// Small valid Service / EndpointSlice / Node objects in API JSON form, for tests and benchmarks
// that feed the stand-in API server.

export interface ServiceOptions {
  readonly port?: number;
  readonly clusterIP?: string;
  readonly labels?: Record<string, string>;
}

export function sampleService(
  namespace: string,
  name: string,
  options: ServiceOptions = {},
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { namespace, name, ...(options.labels ? { labels: options.labels } : {}) },
    spec: {
      type: 'ClusterIP',
      clusterIP: options.clusterIP ?? '10.96.0.10',
      clusterIPs: [options.clusterIP ?? '10.96.0.10'],
      ipFamilies: ['IPv4'],
      ports: [{ name: 'http', protocol: 'TCP', port: options.port ?? 80, targetPort: 8080 }],
    },
  };
}

export interface SliceOptions {
  readonly service?: string;
  /** Endpoint IPv4 addresses; one endpoint each. */
  readonly addresses?: readonly string[];
  readonly port?: number;
  readonly labels?: Record<string, string>;
  readonly nodeName?: string;
}

export function sampleEndpointSlice(
  namespace: string,
  name: string,
  options: SliceOptions = {},
): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      namespace,
      name,
      labels: { 'kubernetes.io/service-name': options.service ?? name, ...options.labels },
    },
    addressType: 'IPv4',
    endpoints: (options.addresses ?? ['10.244.0.5']).map((address) => ({
      addresses: [address],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: options.nodeName ?? 'node-1',
      zone: 'zone-a',
    })),
    ports: [{ name: 'http', protocol: 'TCP', port: options.port ?? 8080 }],
  };
}

export function sampleNode(name: string, internalIP = '192.168.0.10'): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'topology.kubernetes.io/zone': 'zone-a' } },
    spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
    status: { addresses: [{ type: 'InternalIP', address: internalIP }] },
  };
}
