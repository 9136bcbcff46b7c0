// What the model reads of a Service, and the copy the incremental model keeps of each one. The
// model keeps every Service (30,000 at the daemon's benchmark), and a decoded Service carries what
// only decode needed: its kind, its resourceVersion (the informer keeps its own), ipFamilies, a
// clusterIPs array that repeats clusterIP, and a spec built field by field (its fields past the
// fourth in a property array of their own). The kept copy is three small literals.
import type { ObjectMeta, Service, ServiceSpec, ServiceStatus } from '../kube/objects.ts';

/** The spec fields servicePortsOfFamily reads. */
export type ProxiedServiceSpec = Pick<
  ServiceSpec,
  | 'type'
  | 'clusterIP'
  | 'clusterIPs'
  | 'ports'
  | 'externalIPs'
  | 'loadBalancerSourceRanges'
  | 'externalTrafficPolicy'
  | 'internalTrafficPolicy'
  | 'healthCheckNodePort'
  | 'sessionAffinity'
  | 'sessionAffinityConfig'
>;

/** What the model reads of a Service: a decoded Service is one, and so is its kept copy. */
export interface ProxiedService {
  readonly metadata: Pick<ObjectMeta, 'name' | 'namespace' | 'labels' | 'creationTimestamp'>;
  readonly spec: ProxiedServiceSpec;
  readonly status?: ServiceStatus;
}

/**
 * The model's copy of `service`, sharing its strings and parts: ~130 bytes instead of ~250 (3.4
 * MiB at 30,000 Services). clusterIPs is left out when it holds clusterIP alone, which gives the
 * same cluster IPs (servicePortsOfFamily falls back to clusterIP).
 */
export function keptService(service: Service): ProxiedService {
  const { name, namespace, labels, creationTimestamp } = service.metadata;
  const metadata =
    labels === undefined
      ? { name, namespace, creationTimestamp }
      : { name, namespace, creationTimestamp, labels };
  const spec = keptSpec(service.spec);
  const status = service.status;
  return status === undefined ? { metadata, spec } : { metadata, spec, status };
}

function keptSpec(spec: ServiceSpec): ProxiedServiceSpec {
  const { type, clusterIP, clusterIPs, ports } = spec;
  // The usual fields in one literal (held in the object); the rest only when set.
  const kept: { -readonly [F in keyof ProxiedServiceSpec]: ProxiedServiceSpec[F] } = {
    type,
    clusterIP,
    ports,
  };
  if (clusterIPs !== undefined && !(clusterIPs.length === 1 && clusterIPs[0] === clusterIP))
    kept.clusterIPs = clusterIPs;
  if (spec.externalIPs !== undefined) kept.externalIPs = spec.externalIPs;
  if (spec.loadBalancerSourceRanges !== undefined)
    kept.loadBalancerSourceRanges = spec.loadBalancerSourceRanges;
  if (spec.externalTrafficPolicy !== undefined) kept.externalTrafficPolicy = spec.externalTrafficPolicy;
  if (spec.internalTrafficPolicy !== undefined) kept.internalTrafficPolicy = spec.internalTrafficPolicy;
  if (spec.healthCheckNodePort !== undefined) kept.healthCheckNodePort = spec.healthCheckNodePort;
  if (spec.sessionAffinity !== undefined) kept.sessionAffinity = spec.sessionAffinity;
  if (spec.sessionAffinityConfig !== undefined) kept.sessionAffinityConfig = spec.sessionAffinityConfig;
  return kept;
}
