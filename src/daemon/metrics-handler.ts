// The metrics endpoint (metricsBindAddress): /metrics in Prometheus text format and, as kube-proxy
// serves there too, /proxyMode.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DataplaneMode } from '../../dataplanes/shared/dataplane.ts';
import type { ProxyMetrics } from '../sync/metrics.ts';

export function metricsHandler(metrics: ProxyMetrics, mode: DataplaneMode) {
  return async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path === '/metrics') {
      const text = await metrics.registry.metrics();
      response.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text);
    } else if (path === '/proxyMode') {
      response.writeHead(200, { 'Content-Type': 'text/plain' }).end(mode);
    } else {
      response.writeHead(404, { 'Content-Type': 'text/plain' }).end('404 page not found\n');
    }
  };
}
