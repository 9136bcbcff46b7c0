// The informers a proxy needs, with kube-proxy's server-side selectors: Services and
// EndpointSlices that no other proxy claims, headless ones never (with a proxy name, every
// Service and every slice but headless ones: the model picks ours), this node's own Node object, and the cluster's ServiceCIDRs
// (optional: a server before 1.33 does not serve them, and kproxy then runs without).
// The stores keep only the resourceVersions of Services and EndpointSlices: the model keeps what
// it needs from each event (what it reads of Services, slices as records), and a second copy of 30,000 slices
// would cost more than the model itself.

import type { Logger } from 'pino';
import type { BackoffOptions } from './backoff.ts';
import type { KubeApi } from './client.ts';
import { decodeObject } from './decode.ts';
import { Informer } from './informer.ts';
import type { InformerMetrics } from './informer-metrics.ts';
import {
  type EndpointSlice,
  HEADLESS_LABEL,
  type Node,
  type ObjectHead,
  SERVICE_PROXY_NAME_LABEL,
  type Service,
  type ServiceCIDR,
} from './objects.ts';
import { ENDPOINT_SLICES, NODES, SERVICE_CIDRS, SERVICES } from './resources.ts';
import { VersionStore } from './store.ts';

/** kube-proxy's selector, for Services and slices alike: claimed by no proxy, not headless. */
const KUBE_PROXY_SELECTOR = `!${SERVICE_PROXY_NAME_LABEL},!${HEADLESS_LABEL}`;

/**
 * With a proxy name, none: the model picks ours by either of two labels (proxy name or handover,
 * src/model/proxy-labels.ts), which one selector cannot ask for.
 */
export function serviceLabelSelector(proxyName?: string): string | undefined {
  return proxyName ? undefined : KUBE_PROXY_SELECTOR;
}

/** With a proxy name, only not headless: a slice is ours when its Service is, whatever its labels. */
export function endpointSliceLabelSelector(proxyName?: string): string {
  return proxyName ? `!${HEADLESS_LABEL}` : KUBE_PROXY_SELECTOR;
}

function optionalSelector(labelSelector: string | undefined): { labelSelector?: string } {
  return labelSelector === undefined ? {} : { labelSelector };
}

export function nodeFieldSelector(nodeName: string): string {
  return `metadata.name=${nodeName}`;
}

export interface ProxyInformersOptions {
  readonly api: KubeApi;
  readonly nodeName: string;
  /** kube-proxy's service.kubernetes.io/service-proxy-name: serve only services that name us. */
  readonly proxyName?: string;
  readonly logger: Logger;
  readonly metrics: InformerMetrics;
  readonly backoff?: BackoffOptions;
  readonly watchList?: boolean;
  /** The string to keep for a Service's "namespace/name" key: the model's (ModelCache.serviceKeyOf). */
  readonly serviceKeyOf?: (key: string) => string;
}

export interface ProxyInformers {
  readonly services: Informer<Service, ObjectHead>;
  readonly endpointSlices: Informer<EndpointSlice, ObjectHead>;
  readonly node: Informer<Node>;
  readonly serviceCIDRs: Informer<ServiceCIDR>;
}

export function createProxyInformers(options: ProxyInformersOptions): ProxyInformers {
  const common = {
    api: options.api,
    decode: decodeObject,
    logger: options.logger,
    metrics: options.metrics,
    ...(options.backoff ? { backoff: options.backoff } : {}),
    ...(options.watchList === undefined ? {} : { watchList: options.watchList }),
  };
  return {
    services: new Informer<Service, ObjectHead>({
      ...common,
      store: new VersionStore('Service', options.serviceKeyOf),
      resource: SERVICES,
      ...optionalSelector(serviceLabelSelector(options.proxyName)),
    }),
    endpointSlices: new Informer<EndpointSlice, ObjectHead>({
      ...common,
      store: new VersionStore('EndpointSlice'),
      resource: ENDPOINT_SLICES,
      labelSelector: endpointSliceLabelSelector(options.proxyName),
    }),
    node: new Informer<Node>({
      ...common,
      resource: NODES,
      fieldSelector: nodeFieldSelector(options.nodeName),
    }),
    serviceCIDRs: new Informer<ServiceCIDR>({ ...common, resource: SERVICE_CIDRS }),
  };
}

export function startAll(informers: ProxyInformers): void {
  for (const informer of Object.values(informers)) (informer as Informer<never>).start();
}

export async function stopAll(informers: ProxyInformers): Promise<void> {
  await Promise.all(Object.values(informers).map((i: Informer<never>) => i.stop()));
}

export async function waitForAllSynced(informers: ProxyInformers, signal?: AbortSignal): Promise<void> {
  await Promise.all(Object.values(informers).map((i: Informer<never>) => i.waitForSync(signal)));
}
