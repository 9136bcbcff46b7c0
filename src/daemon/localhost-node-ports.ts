// Localhost NodePorts in nftables mode, as kube-proxy 1.37 serves them (KEP-6032, its
// pkg/proxy/localnodeportproxy): the kernel cannot DNAT a connection to 127.0.0.1 or ::1 to a pod
// (IPv4 needs route_localnet, a hole kubernetes#132955 wants gone; IPv6 has nothing), so a
// userspace forwarder listens on 127.0.0.1 / ::1 at each TCP NodePort and relays every connection
// to one of the Service's endpoints. kube-proxy's rules, kept here:
// - a family is served when --nodeport-addresses names its loopback address explicitly
//   ("localhost", or a CIDR holding 127.0.0.1 / ::1 other than a zero one: "all" is not asking);
//   kube-proxy also wants its KubeProxyNFTablesLocalhostNodePorts gate, kproxy has no gates;
// - TCP only (UDP and SCTP get no listener);
// - the endpoints are those of external traffic: the local ones under externalTrafficPolicy
//   Local, the cluster's otherwise; with none there is no listener, so the connection is refused;
// - each connection goes to an endpoint at random; with ClientIP affinity every connection (all
//   come from the loopback address) goes to one endpoint, kept while used within the timeout;
// - a backend that does not answer within 5 s closes the client's connection, without a retry;
// - a listener whose port is taken is counted and tried again at the next sync; a listener that
//   goes (its Service did, or lost its endpoints) closes the connections it relays.
// The kernel's rules never match the loopback address (nftables: nodeport-ips holds node IPs, and
// "all" excludes 127.0.0.0/8 and ::1), so these sockets see the connections first hand.
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { LiveDataplane } from '../../contract/dataplane.ts';
import type { DualStackState, Endpoint, ServicePortKey } from '../../contract/proxy-state.ts';
import { cidrContains } from '../../dataplanes/shared/cidr.ts';
import { SyncFollower } from './sync-follower.ts';

/** The address each family's listeners bind, as kube-proxy's. */
export const LOOPBACK: Readonly<Record<IPFamily, string>> = { IPv4: '127.0.0.1', IPv6: '::1' };

/** kube-proxy's dialTimeout: how long a backend may take to accept. */
export const DIAL_TIMEOUT_MS = 5_000;

/** One listener's work: where it listens and what it relays to. */
export interface LocalhostTarget {
  readonly family: IPFamily;
  readonly nodePort: number;
  /** The service port it serves, for the log. */
  readonly servicePort: ServicePortKey;
  readonly endpoints: readonly Pick<Endpoint, 'ip' | 'port'>[];
  /** ClientIP affinity's timeout; 0 without affinity. */
  readonly affinityMs: number;
}

/**
 * The families whose loopback address --nodeport-addresses names (kube-proxy's
 * ContainsExplicitLoopback): "localhost" both, a CIDR holding 127.0.0.1 or ::1 its own; "all" and
 * zero CIDRs hold them only by accident and do not count.
 */
export function explicitLoopbackFamilies(nodePortAddresses: readonly string[]): readonly IPFamily[] {
  return (['IPv4', 'IPv6'] as const).filter((family) =>
    nodePortAddresses.some(
      (address) =>
        address === 'localhost' || (!address.endsWith('/0') && cidrContains(address, LOOPBACK[family])),
    ),
  );
}

/** The listeners `state` asks for in `families`, by "family port" key. */
export function localhostTargets(
  state: DualStackState,
  families: readonly IPFamily[],
): ReadonlyMap<string, LocalhostTarget> {
  const targets = new Map<string, LocalhostTarget>();
  for (const family of families) {
    for (const port of state[family]?.servicePorts.values() ?? []) {
      if (port.protocol !== 'TCP' || port.nodePort === 0) continue;
      const endpoints = port.externalPolicyLocal ? port.localEndpoints : port.clusterEndpoints;
      if (endpoints.length === 0) continue;
      targets.set(`${family} ${port.nodePort}`, {
        family,
        nodePort: port.nodePort,
        servicePort: port.key,
        endpoints: endpoints.map(({ ip, port: endpointPort }) => ({ ip, port: endpointPort })),
        affinityMs: (port.sessionAffinity?.timeoutSeconds ?? 0) * 1000,
      });
    }
  }
  return targets;
}

export interface LocalhostNodePortsOptions {
  readonly logger: Logger;
  readonly families: readonly IPFamily[];
  /** kube-proxy's two metrics of the forwarder are registered here. */
  readonly registry: Registry;
  /** [0, 1), as Math.random: picks endpoints (tests make it predictable). */
  readonly random?: () => number;
  /** Milliseconds, for the affinity timeout. */
  readonly now?: () => number;
}

/** One listening socket and the connections it relays. */
interface Listener {
  readonly server: Server;
  target: LocalhostTarget;
  /** ClientIP affinity: the endpoint every connection goes to while it is used within the timeout. */
  pinned?: { readonly endpoint: string; lastUsed: number };
  readonly connections: Set<Socket>;
}

const endpointKey = (endpoint: Pick<Endpoint, 'ip' | 'port'>) => `${endpoint.ip} ${endpoint.port}`;

/**
 * The forwarder, following each sync of the dataplane it wraps: `dataplane` brings the kernel to
 * the state, then the listeners follow the same state.
 */
export class LocalhostNodePorts extends SyncFollower {
  readonly #options: LocalhostNodePortsOptions;
  readonly #listeners = new Map<string, Listener>();
  readonly #listenerCount: Gauge<'ip_family'>;
  readonly #failures: Counter<'ip_family'>;

  constructor(dataplane: LiveDataplane, options: LocalhostNodePortsOptions) {
    super(dataplane);
    this.#options = options;
    const registers = [options.registry];
    this.#listenerCount = new Gauge({
      name: 'kubeproxy_nftables_localhost_nodeport_listeners',
      help: 'Listeners of the userspace forwarder for localhost NodePorts, by IP family',
      labelNames: ['ip_family'],
      registers,
    });
    this.#failures = new Counter({
      name: 'kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total',
      help: 'Localhost NodePort listeners that could not be opened (the port is taken), by IP family',
      labelNames: ['ip_family'],
      registers,
    });
    // From the start, at zero: a dashboard shows 0, not "no data".
    for (const family of options.families) {
      this.#listenerCount.set({ ip_family: family }, 0);
      this.#failures.inc({ ip_family: family }, 0);
    }
  }

  protected afterSync(state: DualStackState): Promise<void> {
    return this.update(localhostTargets(state, this.#options.families));
  }

  /** Opens, retargets and closes listeners so that exactly `targets` listen. */
  async update(targets: ReadonlyMap<string, LocalhostTarget>): Promise<void> {
    const { logger } = this.#options;
    for (const [key, listener] of this.#listeners) {
      if (targets.has(key)) continue;
      logger.debug(
        { port: listener.target.nodePort, family: listener.target.family },
        'localhost node port closed',
      );
      this.#close(key, listener);
    }
    for (const [key, target] of targets) {
      const listener = this.#listeners.get(key);
      if (listener) {
        // A changed timeout starts the affinity afresh, as kube-proxy's update.
        if (listener.target.affinityMs !== target.affinityMs) listener.pinned = undefined;
        listener.target = target;
        continue;
      }
      try {
        this.#listeners.set(key, await this.#open(target));
        logger.debug({ port: target.nodePort, family: target.family }, 'localhost node port listening');
      } catch (error) {
        this.#failures.inc({ ip_family: target.family });
        logger.warn(
          {
            port: target.nodePort,
            address: LOOPBACK[target.family],
            servicePort: target.servicePort,
            err: error,
          },
          'cannot listen for a localhost node port; trying again at the next sync',
        );
      }
    }
    this.#count();
  }

  /** Closes every listener and the connections they relay (kproxy stops). */
  close(): void {
    for (const [key, listener] of this.#listeners) this.#close(key, listener);
    this.#count();
  }

  #count(): void {
    for (const family of this.#options.families) {
      const open = [...this.#listeners.values()].filter((listener) => listener.target.family === family);
      this.#listenerCount.set({ ip_family: family }, open.length);
    }
  }

  #close(key: string, listener: Listener): void {
    this.#listeners.delete(key);
    listener.server.close();
    for (const socket of listener.connections) socket.destroy();
  }

  #open(target: LocalhostTarget): Promise<Listener> {
    const server = createServer({ allowHalfOpen: true });
    const listener: Listener = { server, target, connections: new Set() };
    server.on('connection', (client) => this.#relay(listener, client));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: LOOPBACK[target.family], port: target.nodePort }, () => {
        server.off('error', reject);
        server.on('error', (error) =>
          this.#options.logger.warn({ err: error }, 'localhost node port listener'),
        );
        resolve(listener);
      });
    });
  }

  #pick(listener: Listener): Pick<Endpoint, 'ip' | 'port'> {
    const { endpoints, affinityMs } = listener.target;
    const now = (this.#options.now ?? Date.now)();
    const pinned = listener.pinned;
    if (affinityMs > 0 && pinned && now - pinned.lastUsed <= affinityMs) {
      const endpoint = endpoints.find((candidate) => endpointKey(candidate) === pinned.endpoint);
      if (endpoint) {
        pinned.lastUsed = now;
        return endpoint;
      }
    }
    const random = this.#options.random ?? Math.random;
    const endpoint = endpoints[Math.floor(random() * endpoints.length)]!;
    if (affinityMs > 0) listener.pinned = { endpoint: endpointKey(endpoint), lastUsed: now };
    return endpoint;
  }

  #relay(listener: Listener, client: Socket): void {
    const endpoint = this.#pick(listener);
    const backend = connect({ host: endpoint.ip, port: endpoint.port, allowHalfOpen: true });
    const sockets = [client, backend];
    for (const socket of sockets) {
      listener.connections.add(socket);
      socket.once('close', () => listener.connections.delete(socket));
      // Either side failing ends both: the client sees its connection end, as with kube-proxy.
      socket.once('error', () => {
        for (const each of sockets) each.destroy();
      });
    }
    backend.setTimeout(DIAL_TIMEOUT_MS, () => {
      this.#options.logger.debug(
        { endpoint, port: listener.target.nodePort },
        'localhost node port: backend did not answer',
      );
      for (const each of sockets) each.destroy();
    });
    backend.once('connect', () => backend.setTimeout(0));
    // Each direction ends on its own (a half-close is passed on, as kube-proxy's CloseWrite).
    client.pipe(backend);
    backend.pipe(client);
  }
}
