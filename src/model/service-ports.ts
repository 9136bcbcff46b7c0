// Service → the service ports of one IP family, without endpoints (kube-proxy's
// serviceToServiceMap and newBaseServiceInfo). Input comes from decodeObject: IPs are canonical,
// protocols and types defaulted.

import { flatText } from '../../contract/base/flat-text.ts';
import { familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { Protocol, ServicePort } from '../../contract/proxy-state.ts';
import type { ProxiedService, ProxiedServiceSpec } from './kept-service.ts';
import { serviceExcluded } from './proxy-labels.ts';

/** A ServicePort before endpoints are categorised for it. */
export type ServicePortBase = Omit<ServicePort, 'clusterEndpoints' | 'localEndpoints' | 'hasEndpoints'>;

/** kube-proxy's default for sessionAffinityConfig.clientIP.timeoutSeconds (3 hours). */
const DEFAULT_AFFINITY_TIMEOUT_SECONDS = 10800;

/**
 * The service ports of `family`, one per spec.ports entry, or none when the service is not proxied
 * (headless, ExternalName, excluded by label) or has no cluster IP of that family.
 */
export function servicePortsOfFamily(
  service: ProxiedService,
  family: IPFamily,
  proxyName?: string,
): ServicePortBase[] {
  const spec = service.spec;
  if (spec.type === 'ExternalName' || serviceExcluded(service.metadata, proxyName)) return [];
  const clusterIP = clusterIPOfFamily(spec, family);
  if (clusterIP === undefined) return [];

  const namespace = service.metadata.namespace ?? 'default';
  const name = service.metadata.name;
  const type = spec.type ?? 'ClusterIP';
  const hasNodePorts = type === 'NodePort' || type === 'LoadBalancer';
  const externalPolicyLocal = externallyAccessibleService(spec) && spec.externalTrafficPolicy === 'Local';
  const shared = {
    namespace,
    name,
    clusterIP,
    externalIPs: ofFamily(spec.externalIPs ?? [], family),
    loadBalancerIPs: type === 'LoadBalancer' ? loadBalancerIPs(service, family) : NO_ADDRESSES,
    loadBalancerSourceRanges: ofFamily(spec.loadBalancerSourceRanges ?? [], family),
    externalPolicyLocal,
    internalPolicyLocal: spec.internalTrafficPolicy === 'Local',
    healthCheckNodePort: type === 'LoadBalancer' && externalPolicyLocal ? (spec.healthCheckNodePort ?? 0) : 0,
  };
  const affinity =
    spec.sessionAffinity === 'ClientIP'
      ? {
          timeoutSeconds:
            spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS,
        }
      : undefined;

  return (spec.ports ?? []).map((port) => {
    const protocol = (port.protocol ?? 'TCP') as Protocol;
    const base: ServicePortBase = {
      key: flatText(namespace, '/', name, ':', String(port.port), '/', protocol),
      portName: port.name ?? '',
      protocol,
      port: port.port,
      nodePort: hasNodePorts ? (port.nodePort ?? 0) : 0,
      ...shared,
    };
    return affinity === undefined ? base : { ...base, sessionAffinity: affinity };
  });
}

/**
 * This family's cluster IP; undefined for headless services, services without one and services of
 * the other family only. clusterIPs is authoritative; clusterIP alone is what older objects carry.
 */
function clusterIPOfFamily(spec: ProxiedServiceSpec, family: IPFamily): string | undefined {
  const ips =
    spec.clusterIPs !== undefined && spec.clusterIPs.length > 0 ? spec.clusterIPs : [spec.clusterIP ?? ''];
  if (ips[0] === 'None' || ips[0] === '') return undefined;
  return ips.find((ip) => ip !== '' && familyOf(ip) === family);
}

/** kube-proxy's ExternallyAccessible for the service as a whole (any family). */
function externallyAccessibleService(spec: ProxiedServiceSpec): boolean {
  const type = spec.type ?? 'ClusterIP';
  return (
    type === 'LoadBalancer' ||
    type === 'NodePort' ||
    (type === 'ClusterIP' && (spec.externalIPs?.length ?? 0) > 0)
  );
}

/** Ingress IPs of this family that route to the node as VIPs: not ipMode Proxy, not hostname-only. */
function loadBalancerIPs(service: ProxiedService, family: IPFamily): readonly string[] {
  const ips: string[] = [];
  for (const ingress of service.status?.loadBalancer?.ingress ?? []) {
    if (ingress.ip === undefined || ingress.ip === '') continue;
    if (ingress.ipMode !== undefined && ingress.ipMode !== 'VIP') continue;
    ips.push(ingress.ip);
  }
  return ofFamily(ips, family);
}

/** Shared by every port without such addresses (most of them): an empty array per port costs 32 bytes. */
const NO_ADDRESSES: readonly string[] = Object.freeze([]);

function ofFamily(addresses: readonly string[], family: IPFamily): readonly string[] {
  const result: string[] = [];
  for (const address of addresses) {
    if (familyOf(address) === family && !result.includes(address)) result.push(address);
  }
  return result.length === 0 ? NO_ADDRESSES : result;
}
