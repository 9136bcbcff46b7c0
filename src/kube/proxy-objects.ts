// The cluster's objects as the daemon sees them, listed once (`kproxy diff --live-api`): the
// daemon's own informers (proxy-informers.ts: its selectors, its handling of a server without
// ServiceCIDRs, its retries), started, waited for until every one has listed, and stopped.
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import type { KubeApi } from './client.ts';
import type { InformerEvent } from './informer.ts';
import { createInformerMetrics } from './informer-metrics.ts';
import type { KubeObject, ObjectHead } from './objects.ts';
import { createProxyInformers, startAll, stopAll, waitForAllSynced } from './proxy-informers.ts';

export interface ProxyObjectsOptions {
  readonly api: KubeApi;
  readonly nodeName: string;
  /** kube-proxy's service.kubernetes.io/service-proxy-name, as the daemon's. */
  readonly proxyName?: string;
  /** Where the informers say why a list failed (they retry it). */
  readonly logger: Logger;
  /** Gives up waiting (the informers retry a failing list for ever): its reason is thrown. */
  readonly signal: AbortSignal;
}

/** Services, EndpointSlices, this node's Node and the ServiceCIDRs, as the daemon lists them. */
export async function listProxyObjects(options: ProxyObjectsOptions): Promise<KubeObject[]> {
  const informers = createProxyInformers({
    api: options.api,
    nodeName: options.nodeName,
    ...(options.proxyName ? { proxyName: options.proxyName } : {}),
    logger: options.logger,
    metrics: createInformerMetrics(new Registry()),
  });
  const objects = new Map<string, KubeObject>();
  const keep = (resource: string) => (event: InformerEvent<KubeObject, ObjectHead>) => {
    const key = `${resource}/${event.key}`;
    if (event.type === 'delete') objects.delete(key);
    else objects.set(key, event.object);
  };
  informers.services.onChange(keep('services'));
  informers.endpointSlices.onChange(keep('endpointslices'));
  informers.node.onChange(keep('nodes'));
  informers.serviceCIDRs.onChange(keep('servicecidrs'));
  startAll(informers);
  try {
    await waitForAllSynced(informers, options.signal);
  } finally {
    await stopAll(informers);
  }
  return [...objects.values()];
}
