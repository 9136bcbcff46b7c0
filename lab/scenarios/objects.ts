// The Services and EndpointSlices the scenarios write, in API JSON form. Services have no selector
// and their slices are marked as managed by the lab, so a real cluster's endpoint controller leaves
// them alone and both labs serve exactly the endpoints a scenario chose.
import type { KubeJson, LabPod } from '../driver.ts';

export const LAB_NAMESPACE = 'default';
export const MANAGED_BY = 'kproxy-lab';

export interface LabServiceSpec {
  readonly name: string;
  readonly clusterIP: string;
  readonly protocol?: 'TCP' | 'UDP';
  readonly port: number;
  readonly targetPort: number;
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  readonly nodePort?: number;
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly healthCheckNodePort?: number;
  readonly clientIPAffinity?: boolean;
}

export function labService(spec: LabServiceSpec): KubeJson {
  const port: Record<string, unknown> = {
    name: 'p',
    protocol: spec.protocol ?? 'TCP',
    port: spec.port,
    targetPort: spec.targetPort,
  };
  if (spec.nodePort !== undefined) port.nodePort = spec.nodePort;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      namespace: LAB_NAMESPACE,
      name: spec.name,
      labels: { 'app.kubernetes.io/part-of': MANAGED_BY },
    },
    spec: {
      type: spec.type ?? 'ClusterIP',
      clusterIP: spec.clusterIP,
      clusterIPs: [spec.clusterIP],
      ipFamilies: ['IPv4'],
      ports: [port],
      ...(spec.externalTrafficPolicy ? { externalTrafficPolicy: spec.externalTrafficPolicy } : {}),
      ...(spec.healthCheckNodePort ? { healthCheckNodePort: spec.healthCheckNodePort } : {}),
      ...(spec.clientIPAffinity
        ? { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } }
        : {}),
    },
  };
}

export interface LabEndpoint {
  readonly pod: LabPod;
  /** Default true; a not-ready endpoint must receive no traffic. */
  readonly ready?: boolean;
}

/** The one slice of `service`, serving its port on the pods' `targetPort`. */
export function labSlice(service: KubeJson, endpoints: readonly LabEndpoint[]): KubeJson {
  const port = ((service.spec as { ports: Record<string, unknown>[] }).ports[0] ?? {}) as {
    protocol: string;
    targetPort: number;
  };
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      namespace: LAB_NAMESPACE,
      name: `${service.metadata.name}-lab`,
      labels: {
        'kubernetes.io/service-name': service.metadata.name,
        'endpointslice.kubernetes.io/managed-by': MANAGED_BY,
      },
    },
    addressType: 'IPv4',
    endpoints: endpoints.map(({ pod, ready = true }) => ({
      addresses: [pod.address],
      conditions: { ready, serving: ready, terminating: false },
      nodeName: pod.node,
    })),
    ports: [{ name: 'p', protocol: port.protocol, port: port.targetPort }],
  };
}
