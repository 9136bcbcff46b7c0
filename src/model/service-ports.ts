// Service → the service ports of one IP family, without endpoints (kube-proxy's
// serviceToServiceMap and newBaseServiceInfo). Input comes from decodeObject: IPs are canonical,
// protocols and types defaulted.

import { flatText } from '../../contract/base/flat-text.ts';
import { familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { Protocol, ServicePort } from '../../contract/proxy-state.ts';
import type { ProxiedService } from './kept-service.ts';
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
  if (service.type === 'ExternalName' || serviceExcluded(service, proxyName)) return [];
  const clusterIP = clusterIPOfFamily(service, family);
  if (clusterIP === undefined) return [];

  const namespace = service.namespace ?? 'default';
  const name = service.name;
  const type = service.type ?? 'ClusterIP';
  const hasNodePorts = type === 'NodePort' || type === 'LoadBalancer';
  const externalPolicyLocal =
    externallyAccessibleService(service) && service.externalTrafficPolicy === 'Local';
  const shared = {
    namespace,
    name,
    clusterIP,
    externalIPs: ofFamily(service.externalIPs ?? [], family),
    loadBalancerIPs: type === 'LoadBalancer' ? loadBalancerIPs(service, family) : NO_ADDRESSES,
    loadBalancerSourceRanges: ofFamily(service.loadBalancerSourceRanges ?? [], family),
    externalPolicyLocal,
    internalPolicyLocal: service.internalTrafficPolicy === 'Local',
    healthCheckNodePort:
      type === 'LoadBalancer' && externalPolicyLocal ? (service.healthCheckNodePort ?? 0) : 0,
  };
  const affinity =
    service.sessionAffinity === 'ClientIP'
      ? {
          timeoutSeconds:
            service.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS,
        }
      : undefined;

  return (service.ports ?? []).map((port) => {
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
function clusterIPOfFamily(service: ProxiedService, family: IPFamily): string | undefined {
  const ips =
    service.clusterIPs !== undefined && service.clusterIPs.length > 0
      ? service.clusterIPs
      : [service.clusterIP ?? ''];
  if (ips[0] === 'None' || ips[0] === '') return undefined;
  return ips.find((ip) => ip !== '' && familyOf(ip) === family);
}

/** kube-proxy's ExternallyAccessible for the service as a whole (any family). */
function externallyAccessibleService(service: ProxiedService): boolean {
  const type = service.type ?? 'ClusterIP';
  return (
    type === 'LoadBalancer' ||
    type === 'NodePort' ||
    (type === 'ClusterIP' && (service.externalIPs?.length ?? 0) > 0)
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
