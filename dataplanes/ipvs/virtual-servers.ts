// ProxyState → the IPVS virtual servers kube-proxy's IPVS proxier would create (syncService and
// syncEndpoint in pkg/proxy/ipvs/proxier.go), per family:
// - a virtual server per ClusterIP, external IP and LoadBalancer IP (these addresses are bound to
//   the dummy link so the node accepts them) and per node-port address × node port (not bound);
// - real servers: the model's internal endpoints for the ClusterIP, its external endpoints for
//   external IPs, LB IPs and node ports (contract/traffic-decisions.ts), weight 1, masquerade
//   forwarding;
// - never persistent: ClientIP affinity is the companion table's (affinity.ts), because IPVS
//   persistence does not honour the timeout (kubernetes#89358).
// A virtual server exists even without real servers, as upstream; the companion nft rules reject
// or drop its traffic before IPVS sees it.
import { compareText } from '../../contract/base/compare-text.ts';
import { familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { EndpointList, Protocol, ProxyState, ServicePort } from '../../contract/proxy-state.ts';
import { trafficDecisions } from '../../contract/traffic-decisions.ts';
import { cidrContains } from '../shared/cidr.ts';
import { familySyntax } from '../shared/nft/family-syntax.ts';

export interface RealServer {
  readonly address: string;
  readonly port: number;
  readonly weight: number;
}

/** What identifies a virtual server in the kernel, plus its settings (no real servers). */
export interface VirtualService {
  readonly family: IPFamily;
  readonly protocol: Protocol;
  readonly address: string;
  readonly port: number;
  readonly scheduler: string;
  /** The scheduler's flags (ipvsadm -b), sorted; only mh has any (schedulerFlags). */
  readonly schedulerFlags: readonly SchedulerFlag[];
  /** Persistence timeout in seconds; 0 = not persistent (kproxy's; a kernel's may be). */
  readonly persistenceTimeout: number;
}

export type SchedulerFlag = 'mh-fallback' | 'mh-port';

/**
 * The flags kproxy gives a scheduler. For mh, kube-proxy sets mh-port (hash the source port too,
 * so one client's connections spread like sh with ports) but not mh-fallback, so a real server at
 * weight 0 (draining, terminating) stays in mh's lookup table and the connections hashed to it
 * fail with "no destination available" (kubernetes#138688, #139497). With mh-fallback they go to
 * the next available server, as every other scheduler does.
 */
export function schedulerFlags(scheduler: string): readonly SchedulerFlag[] {
  return scheduler === 'mh' ? ['mh-fallback', 'mh-port'] : [];
}

export interface VirtualServer extends VirtualService {
  /** The service port this virtual server serves (for people reading a plan). */
  readonly servicePort: string;
  /** Sorted by address then port. */
  readonly realServers: readonly RealServer[];
}

export interface IpvsFamilyServers {
  /** Virtual servers by virtualServerKey, in key order. */
  readonly virtualServers: ReadonlyMap<string, VirtualServer>;
  /** Addresses to bind to the dummy link, sorted. */
  readonly boundAddresses: readonly string[];
  /** Node addresses with node-port virtual servers. */
  readonly nodePortAddresses: readonly string[];
}

/** "1.2.3.4:80" or "[fd00::1]:80". */
export function hostPort(address: string, port: number): string {
  return familySyntax(familyOf(address)).hostPort(address, port);
}

/** "TCP 10.96.0.10:80": unique per virtual server. */
export function virtualServerKey(vs: Pick<VirtualService, 'protocol' | 'address' | 'port'>): string {
  return `${vs.protocol} ${hostPort(vs.address, vs.port)}`;
}

/** "10.244.1.10:8080": unique per real server of one virtual server. */
export function realServerKey(rs: Pick<RealServer, 'address' | 'port'>): string {
  return hostPort(rs.address, rs.port);
}

function realServers(endpoints: EndpointList): RealServer[] {
  return endpoints.map((ep) => ({ address: ep.ip, port: ep.port, weight: 1 }));
}

/** The node addresses where node ports are served (--nodeport-addresses). */
export function nodePortAddresses(state: ProxyState): readonly string[] {
  const cidrs = state.node.nodePortAddresses;
  if (cidrs === 'all') return state.node.nodeIPs;
  return state.node.nodeIPs.filter((ip) => cidrs.some((cidr) => cidrContains(cidr, ip)));
}

/**
 * The virtual servers and bound addresses of `ports` (all of the state's by default, else some of
 * them in key order: an incremental plan builds only the ports it touches).
 */
export function ipvsFamilyServers(
  state: ProxyState,
  scheduler: string,
  ports: Iterable<ServicePort> = state.servicePorts.values(),
): IpvsFamilyServers {
  const servers = new Map<string, VirtualServer>();
  const bound = new Set<string>();
  const add = (sp: ServicePort, address: string, port: number, endpoints: EndpointList): void => {
    const vs: VirtualServer = {
      family: state.family,
      protocol: sp.protocol,
      address,
      port,
      scheduler,
      schedulerFlags: schedulerFlags(scheduler),
      persistenceTimeout: 0,
      servicePort: sp.key,
      realServers: realServers(endpoints),
    };
    const key = virtualServerKey(vs);
    // An address claimed by an earlier service port (in key order) stays with it.
    if (!servers.has(key)) servers.set(key, vs);
  };
  const nodeAddresses = nodePortAddresses(state);
  for (const sp of ports) {
    const d = trafficDecisions(sp);
    // No cluster IP ('') when an older Service holds it.
    if (sp.clusterIP !== '') {
      add(sp, sp.clusterIP, sp.port, d.internalEndpoints);
      bound.add(sp.clusterIP);
    }
    for (const ip of [...sp.externalIPs, ...sp.loadBalancerIPs]) {
      add(sp, ip, sp.port, d.externalEndpoints);
      bound.add(ip);
    }
    if (sp.nodePort !== 0) {
      for (const ip of nodeAddresses) add(sp, ip, sp.nodePort, d.externalEndpoints);
    }
  }
  return {
    virtualServers: new Map([...servers].sort(([a], [b]) => compareText(a, b))),
    boundAddresses: [...bound].sort(compareText),
    nodePortAddresses: nodeAddresses,
  };
}
