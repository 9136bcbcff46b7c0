// The metrics endpoint (metricsBindAddress): /metrics in Prometheus text format and, as kube-proxy
// serves there too, /proxyMode.
import type { ServerResponse } from 'node:http';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import type { ProxyMetrics } from '../sync/metrics.ts';

export function metricsHandler(metrics: ProxyMetrics, mode: DataplaneMode) {
  // Scrapes that arrive while one is being rendered share it: a peer pipelining thousands of
  // /metrics requests costs one rendering at a time, not thousands at once.
  let rendering: Promise<string> | undefined;
  const render = () =>
    (rendering ??= metrics.registry.metrics().finally(() => {
      rendering = undefined;
    }));
  // The path comes from the listener (http-listener.ts), which has refused what cannot be parsed.
  return async (path: string, response: ServerResponse): Promise<void> => {
    if (path === '/metrics') {
      const text = await render();
      response.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text);
    } else if (path === '/proxyMode') {
      response.writeHead(200, { 'Content-Type': 'text/plain' }).end(mode);
    } else {
      response.writeHead(404, { 'Content-Type': 'text/plain' }).end('404 page not found\n');
    }
  };
}
