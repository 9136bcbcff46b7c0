// One HTTP listener per healthCheckNodePort (LoadBalancer services with externalTrafficPolicy
// Local), answering as kube-proxy does (pkg/proxy/healthcheck/service_health.go): cloud load
// balancers probe it to send traffic only to nodes with a ready local endpoint, weighted by the
// X-Load-Balancing-Endpoint-Weight header. Listeners follow the services as they change, and, as
// kube-proxy's, listen only on the node's NodePort addresses (--nodeport-addresses).
import type { ServerResponse } from 'node:http';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { cidrContains } from '../../dataplanes/shared/cidr.ts';
import { type HttpListener, type ListenOptions, listenHttp } from './http-listener.ts';

export interface HealthCheckService {
  readonly namespace: string;
  readonly name: string;
  /** Distinct ready local endpoint IPs over all the service's ports and both families. */
  readonly localEndpoints: number;
}

/** healthCheckNodePort → the service it reports on. */
export function healthCheckServices(state: DualStackState): ReadonlyMap<number, HealthCheckService> {
  const ips = new Map<number, { namespace: string; name: string; ips: Set<string> }>();
  for (const family of [state.IPv4, state.IPv6]) {
    for (const port of family?.servicePorts.values() ?? []) {
      if (port.healthCheckNodePort === 0) continue;
      let entry = ips.get(port.healthCheckNodePort);
      if (!entry) {
        entry = { namespace: port.namespace, name: port.name, ips: new Set() };
        ips.set(port.healthCheckNodePort, entry);
      }
      // Only ready ones: a node with only terminating endpoints should fail the check (kube-proxy).
      for (const endpoint of [...port.localEndpoints, ...port.clusterEndpoints]) {
        if (endpoint.isLocal && endpoint.ready) entry.ips.add(endpoint.ip);
      }
    }
  }
  const services = new Map<number, HealthCheckService>();
  for (const [port, { namespace, name, ips: set }] of [...ips].sort(([a], [b]) => a - b)) {
    services.set(port, { namespace, name, localEndpoints: set.size });
  }
  return services;
}

/** Every address ("::") when a family serves node ports on all of them. */
const ALL = ['::'];

/** The address lo carries in each family. */
const LOOPBACK: Readonly<Record<IPFamily, string>> = { IPv4: '127.0.0.1', IPv6: '::1' };

/**
 * Where the health check node ports listen: the node's addresses inside --nodeport-addresses,
 * over both families, or every address when a family does not limit them. kube-proxy's
 * GetNodeIPs takes them from the interfaces, lo's included: a CIDR holding 127.0.0.1 or ::1
 * ('localhost', 127.0.0.0/8) listens there too, and 'localhost' alone only there.
 */
export function healthCheckHosts(state: DualStackState): readonly string[] {
  const hosts: string[] = [];
  const families = [state.IPv4, state.IPv6].filter((family) => family !== undefined);
  for (const { family, node } of families) {
    const cidrs = node.nodePortAddresses;
    if (cidrs === 'all') return ALL;
    for (const ip of [...node.nodeIPs, LOOPBACK[family]]) {
      if (cidrs.some((cidr) => cidrContains(cidr, ip)) && !hosts.includes(ip)) hosts.push(ip);
    }
  }
  return families.length === 0 ? ALL : hosts;
}

export interface HealthCheckNodePortsOptions {
  /** Listen here instead of the NodePort addresses (tests on loopback). */
  readonly host?: string;
  /** kube-proxy's "serviceProxyHealthy": the sync loop keeps up. */
  readonly proxyHealthy: () => boolean;
  /** Passed to every listener (refusals counted and logged by the daemon). */
  readonly listenOptions?: ListenOptions;
}

export interface HealthCheckUpdate {
  readonly opened: readonly number[];
  readonly closed: readonly number[];
  readonly failed: readonly { readonly port: number; readonly error: unknown }[];
}

export class HealthCheckNodePorts {
  readonly #options: HealthCheckNodePortsOptions;
  /** One listener per port and host. */
  readonly #listeners = new Map<number, HttpListener[]>();
  /** The hosts the listeners are on; when they change, every port is reopened. */
  #hosts: readonly string[] = [];
  #services: ReadonlyMap<number, HealthCheckService> = new Map();
  /** Updates run one after another; each sees the listeners the previous one left. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: HealthCheckNodePortsOptions) {
    this.#options = options;
  }

  /** Open listeners for new ports, close those no longer wanted; counts change at once. */
  update(state: DualStackState): Promise<HealthCheckUpdate> {
    const services = healthCheckServices(state);
    this.#services = services;
    const hosts = this.#options.host === undefined ? healthCheckHosts(state) : [this.#options.host];
    const run = this.#queue.then(() => this.#reconcile(services, hosts));
    this.#queue = run.catch(() => {});
    return run;
  }

  get ports(): readonly number[] {
    return [...this.#listeners.keys()].sort((a, b) => a - b);
  }

  async close(): Promise<void> {
    this.#services = new Map();
    await this.#queue;
    await this.#reconcile(new Map(), this.#hosts);
  }

  /** The hosts listened on (the last update's). */
  get hosts(): readonly string[] {
    return this.#hosts;
  }

  async #reconcile(
    services: ReadonlyMap<number, HealthCheckService>,
    hosts: readonly string[],
  ): Promise<HealthCheckUpdate> {
    const opened: number[] = [];
    const closed: number[] = [];
    const failed: { port: number; error: unknown }[] = [];
    const moved = hosts.join() !== this.#hosts.join();
    this.#hosts = hosts;
    for (const [port, listeners] of this.#listeners) {
      if (services.has(port) && !moved) continue;
      this.#listeners.delete(port);
      await Promise.all(listeners.map((listener) => listener.close()));
      if (!services.has(port)) closed.push(port);
    }
    for (const port of services.keys()) {
      if (this.#listeners.has(port)) continue;
      const listeners: HttpListener[] = [];
      try {
        for (const host of hosts) {
          // Any path: load balancers probe "/" or a configured one, as kube-proxy answers them all.
          listeners.push(
            await listenHttp(
              host,
              port,
              (_, response) => this.#answer(port, response),
              this.#options.listenOptions,
            ),
          );
        }
        this.#listeners.set(port, listeners);
        opened.push(port);
      } catch (error) {
        // Retried on the next update (e.g. the port was briefly held by an old listener).
        await Promise.all(listeners.map((listener) => listener.close()));
        failed.push({ port, error });
      }
    }
    return { opened, closed, failed };
  }

  #answer(port: number, response: ServerResponse): void {
    const service = this.#services.get(port);
    if (!service) {
      response.writeHead(404, { 'Content-Type': 'text/plain' }).end('404 page not found\n');
      return;
    }
    const healthy = this.#options.proxyHealthy();
    const count = service.localEndpoints;
    const body = {
      service: { namespace: service.namespace, name: service.name },
      localEndpoints: count,
      serviceProxyHealthy: healthy,
    };
    response
      .writeHead(count > 0 && healthy ? 200 : 503, {
        'Content-Type': 'application/json',
        'X-Content-Type-Options': 'nosniff',
        'X-Load-Balancing-Endpoint-Weight': String(count),
      })
      .end(JSON.stringify(body));
  }
}
