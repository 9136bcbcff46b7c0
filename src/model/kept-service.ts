// What the model reads of a Service, and the copy the incremental model keeps of each one. The
// model keeps every Service (30,000 at the daemon's benchmark), and a decoded Service carries what
// only decode needed: its kind, its resourceVersion (the informer keeps its own), ipFamilies, a
// clusterIPs array that repeats clusterIP, and three objects (Service, metadata, spec; the spec
// built field by field, its fields past the fourth in a property array of their own). The kept
// copy is one flat literal.
import type { ObjectMeta, Service, ServiceSpec, ServiceStatus } from '../kube/objects.ts';

/** The spec fields servicePortsOfFamily reads. */
type ProxiedServiceSpec = Pick<
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

/** What the model reads of a Service, its metadata's and spec's fields side by side. */
export interface ProxiedService
  extends Pick<ObjectMeta, 'name' | 'namespace' | 'labels' | 'creationTimestamp'>,
    ProxiedServiceSpec {
  /** "namespace/name" (serviceKey): the one string the model, its slices and the informer share. */
  readonly key: string;
  readonly status?: ServiceStatus;
}

type Writable<T> = { -readonly [F in keyof T]: T[F] };

/**
 * The model's copy of `service`, sharing its strings and parts: 72 bytes for the usual Service
 * instead of ~270 in four objects (~6 MiB at 30,000 Services). clusterIPs is left out when it
 * holds clusterIP alone, which gives the same cluster IPs (servicePortsOfFamily falls back to it).
 */
export function keptService(service: Service, key: string): ProxiedService {
  const { name, namespace, creationTimestamp, labels } = service.metadata;
  const { spec, status } = service;
  const { type, clusterIP, clusterIPs, ports } = spec;
  // The usual fields in one literal (held in the object); the rest only when set.
  const kept: Writable<ProxiedService> = { key, name, namespace, creationTimestamp, type, clusterIP, ports };
  if (labels !== undefined) kept.labels = labels;
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
  if (status !== undefined) kept.status = status;
  return kept;
}
