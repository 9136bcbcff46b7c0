// Which UDP conntrack entries are stale, as kube-proxy's conntrack reconciler (since 1.32) decides:
// an entry whose original destination is a UDP service address and port (cluster, external or
// LoadBalancer IP) or a node port, and whose reply source (the DNAT target) is not a serving
// endpoint of that service port. Everything else is left to time out. So:
// - a flow to an endpoint that went away goes; flows to endpoints still serving stay, however the
//   traffic policy, topology or terminating state now routes new flows (they are kept, as TCP
//   connections are), and a restart deletes nothing healthy (kubernetes#122740);
// - a flow that was not DNATed (reply source = the service address: it arrived before the rules)
//   goes, so a client that keeps its socket does not stay blackholed (kubernetes#48370);
// - a service port scaled to zero, or deleted, or an address or node port it no longer has, has
//   no serving endpoint: all of its flows go (kubernetes#139628, #141371). A Service deleted while
//   kproxy was down is known by its address alone: a DNATed flow to an address of the service
//   CIDRs that no UDP service port holds goes when every flow is judged (start-up, full syncs).
// Addresses are keyed with their port: two UDP ports of one cluster IP have their own endpoints.
import { compareText } from '../../../contract/base/compare-text.ts';
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { Steps } from '../../../contract/base/work-slices.ts';
import type { ProxyState, ServicePort, ServicePortKey } from '../../../contract/proxy-state.ts';
import { cidrMatcher } from '../cidr.ts';
import type { UdpFlow } from './udp-flow-listing.ts';

/** Who may answer a UDP flow to each service address and node port of one family. */
export interface ServingIndex {
  /** "address port" → serving endpoint IPs; an empty set: every flow there is stale. */
  readonly addresses: ReadonlyMap<string, ReadonlySet<string>>;
  readonly nodePorts: ReadonlyMap<number, ReadonlySet<string>>;
  /** The node's IPs: an untranslated flow to one of them at a node port came before the rules. */
  readonly nodeIPs: ReadonlySet<string>;
  /** When every UDP service port is indexed: the service CIDRs, where no other DNAT is ours. */
  readonly serviceCIDRs: readonly string[];
}

/** One `conntrack -D`: every entry to origDst:port that `replySrc` answers. */
export interface StaleFlowFilter {
  readonly family: IPFamily;
  readonly origDst: string;
  readonly port: number;
  readonly replySrc: string;
}

const NONE: ReadonlySet<string> = new Set();
/** Service ports looked at between pauses. */
const PORTS_PER_STEP = 1_000;

/**
 * The index of `next`'s UDP service ports, with what `prev`'s had and `next`'s do not (deleted
 * ports, dropped addresses) as served by nobody. With `only`, just those service ports (the ones a
 * sync changed: flows to the others were already right).
 */
export function* servingIndex(
  next: ProxyState | undefined,
  prev: ProxyState | undefined,
  only?: ReadonlySet<ServicePortKey>,
): Steps<ServingIndex> {
  const addresses = new Map<string, ReadonlySet<string>>();
  const nodePorts = new Map<number, ReadonlySet<string>>();
  let looked = 0;
  for (const sp of udpPorts(next, only)) {
    if (++looked % PORTS_PER_STEP === 0) yield;
    const serving = servingIPs(sp);
    for (const ip of serviceIPs(sp)) addresses.set(`${ip} ${sp.port}`, serving);
    if (sp.nodePort !== 0) nodePorts.set(sp.nodePort, serving);
  }
  for (const sp of udpPorts(prev, only)) {
    if (++looked % PORTS_PER_STEP === 0) yield;
    for (const ip of serviceIPs(sp)) {
      const key = `${ip} ${sp.port}`;
      if (!addresses.has(key)) addresses.set(key, NONE);
    }
    if (sp.nodePort !== 0 && !nodePorts.has(sp.nodePort)) nodePorts.set(sp.nodePort, NONE);
  }
  const node = (next ?? prev)?.node;
  const serviceCIDRs = only === undefined ? (node?.serviceCIDRs ?? []) : [];
  return { addresses, nodePorts, nodeIPs: new Set(node?.nodeIPs ?? []), serviceCIDRs };
}

/** Whether any flow could be stale under the index (else the dump can be skipped). */
export function indexesAnything(index: ServingIndex): boolean {
  return index.addresses.size > 0 || index.nodePorts.size > 0 || index.serviceCIDRs.length > 0;
}

/** Flows judged between pauses (a dump can hold 100k+ flows). */
const FLOWS_PER_STEP = 5_000;

/** The deletions that remove exactly the stale flows, one per (destination, port, endpoint), in order. */
export function* staleFlowFilters(
  family: IPFamily,
  flows: readonly UdpFlow[],
  index: ServingIndex,
): Steps<StaleFlowFilter[]> {
  const filters = new Map<string, StaleFlowFilter>();
  const inServiceCIDRs = cidrMatcher(index.serviceCIDRs);
  for (const [i, flow] of flows.entries()) {
    if (i % FLOWS_PER_STEP === FLOWS_PER_STEP - 1) yield;
    if (!isStale(flow, index, inServiceCIDRs)) continue;
    const key = `${flow.origDst} ${flow.origDport} ${flow.replySrc}`;
    if (!filters.has(key))
      filters.set(key, { family, origDst: flow.origDst, port: flow.origDport, replySrc: flow.replySrc });
  }
  return [...filters.values()].sort(
    (a, b) => compareText(a.origDst, b.origDst) || a.port - b.port || compareText(a.replySrc, b.replySrc),
  );
}

function isStale(flow: UdpFlow, index: ServingIndex, inServiceCIDRs: (ip: string) => boolean): boolean {
  const atAddress = index.addresses.get(`${flow.origDst} ${flow.origDport}`);
  if (atAddress !== undefined) return !atAddress.has(flow.replySrc);
  // An untranslated flow to some other host (a pod's own traffic out) is not ours.
  const translated = flow.replySrc !== flow.origDst;
  const atNodePort = index.nodePorts.get(flow.origDport);
  if (atNodePort !== undefined)
    return (translated || index.nodeIPs.has(flow.origDst)) && !atNodePort.has(flow.replySrc);
  return translated && inServiceCIDRs(flow.origDst);
}

function* udpPorts(state: ProxyState | undefined, only: ReadonlySet<ServicePortKey> | undefined) {
  if (state === undefined) return;
  if (only === undefined) {
    for (const sp of state.servicePorts.values()) if (sp.protocol === 'UDP') yield sp;
    return;
  }
  for (const key of only) {
    const sp = state.servicePorts.get(key);
    if (sp?.protocol === 'UDP') yield sp;
  }
}

/** Whether any of `keys` is a UDP service port in either state. */
export function touchesUdp(
  keys: ReadonlySet<ServicePortKey>,
  prev: ProxyState | undefined,
  next: ProxyState | undefined,
): boolean {
  for (const key of keys) {
    if (prev?.servicePorts.get(key)?.protocol === 'UDP') return true;
    if (next?.servicePorts.get(key)?.protocol === 'UDP') return true;
  }
  return false;
}

function serviceIPs(sp: ServicePort): string[] {
  // No cluster IP ('') when an older Service holds it.
  return [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].filter(Boolean);
}

function servingIPs(sp: ServicePort): ReadonlySet<string> {
  const ips = new Set<string>();
  for (const list of [sp.clusterEndpoints, sp.localEndpoints, sp.otherServingEndpoints ?? []])
    for (const endpoint of list) ips.add(endpoint.ip);
  return ips;
}
