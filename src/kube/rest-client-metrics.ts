// client-go's request metrics (component-base/metrics/prometheus/restclient), which kube-proxy
// exports and its dashboards chart: requests by code, host and method, and their latency (to the
// response headers) by verb and host. Present from the start, at zero, for the one host and verb
// kproxy uses, so a node that never reaches its API server shows zeros rather than no data.
import { Counter, Histogram, type Registry } from 'prom-client';

/** client-go's request latency buckets. */
const REQUEST_DURATION_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/** One API request as the client saw it; `code` is undefined when no response came (client-go's "<error>"). */
export interface ApiRequestOutcome {
  readonly method: string;
  readonly code: number | undefined;
  readonly seconds: number;
}

export type ApiRequestObserver = (outcome: ApiRequestOutcome) => void;

/** `host`: the API server's host:port, as client-go labels it (url.Host). */
export function registerRestClientMetrics(registry: Registry, host: string): ApiRequestObserver {
  const requests = new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'host', 'method'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'rest_client_request_duration_seconds',
    help: 'Request latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'],
    buckets: REQUEST_DURATION_BUCKETS,
    registers: [registry],
  });
  // kproxy only lists and watches.
  requests.inc({ code: '200', host, method: 'GET' }, 0);
  duration.zero({ verb: 'GET', host });
  return ({ method, code, seconds }) => {
    requests.inc({ code: code === undefined ? '<error>' : String(code), host, method });
    if (code !== undefined) duration.observe({ verb: method, host }, seconds);
  };
}
