// One service port's elements: its VIPs and node port in the dispatch maps, its endpoints, the
// no-endpoint verdicts and the LoadBalancer firewall. The model's traffic decisions
// (contract/traffic-decisions.ts) spelled as map elements:
// - a VIP gets a service-ips element when some traffic to it can be served (for eTP Local that
//   includes the pod/host short-circuit, so the element stays while any endpoint exists); a
//   counted key (countedKeys) keeps it, and its dispatch element, while the port exists: without
//   endpoints it has no count element, so its packets meet no DNAT and the no-endpoint checks
//   decide them, as they would without the elements. An element with a chain verdict added makes
//   the kernel validate the whole table at commit, so a scale to 0 and back adds none;
// - traffic with no usable endpoint meets the decision's verdict: the key in a plain set that a
//   `reject` rule reads (not a `goto reject-chain` element, for the same reason), or `drop`.
import type { Endpoint, NodeSettings, ServicePort } from '../../contract/proxy-state.ts';
import type { NoEndpointVerdict } from '../../contract/traffic-decisions.ts';
import { trafficDecisions } from '../../contract/traffic-decisions.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { addFirewall } from '../shared/nft/service-rules.ts';
import { type ElementSpec, fitComment } from '../shared/nft/transaction.ts';
import { addDispatch, countedKeys } from './endpoint-dispatch.ts';
import { type EndpointIndexes, type PortSlots, slottedSets } from './endpoint-slots.ts';
import type { PortWrite } from './port-write.ts';
import {
  CLUSTER,
  type DispatchTarget,
  type L4Protocol,
  LOCAL,
  NODEPORT_CLUSTER,
  NODEPORT_LOCAL,
  SETS,
} from './sets.ts';

/** Where a kind of key goes without usable endpoints: a set for REJECT, a verdict map for DROP. */
interface NoEndpointSets {
  readonly reject: string;
  readonly drop: string;
}

const NO_ENDPOINT_VIPS: NoEndpointSets = {
  reject: SETS.noEndpointServicesReject.name,
  drop: SETS.noEndpointServices.name,
};

const NO_ENDPOINT_NODEPORTS: NoEndpointSets = {
  reject: SETS.noEndpointNodePortsReject.name,
  drop: SETS.noEndpointNodePorts.name,
};

function addNoEndpoint(
  builder: RulesetBuilder,
  sets: NoEndpointSets,
  key: string,
  verdict: NoEndpointVerdict,
  comment: string,
): void {
  if (verdict === 'reject') builder.addElement(sets.reject, { key, comment });
  else builder.addElement(sets.drop, { key, value: 'drop', comment });
}

function addClusterIP(w: PortWrite): void {
  const { builder, sp, decisions: d } = w;
  if (sp.clusterIP === '') return; // held by an older Service (src/model/address-claims.ts)
  // Shared by the service's ports (a reference count in fragment-index.ts).
  builder.addElement(SETS.clusterIps.name, { key: sp.clusterIP });
  const key = `${sp.clusterIP} . ${w.proto} . ${sp.port}`;
  const comment = fitComment(sp.key);
  if (d.internalVerdict !== undefined) {
    addNoEndpoint(builder, NO_ENDPOINT_VIPS, key, d.internalVerdict, comment);
    if (!countedKeys(w)) return;
  }
  builder.addElement(SETS.serviceIps.name, { key, value: 'goto cluster-ip', comment });
  const endpoints = w.sets.internal;
  addDispatch(w, {
    target: CLUSTER,
    address: sp.clusterIP,
    port: sp.port,
    endpoints,
    indexes: w.indexes?.internal,
  });
}

/**
 * The maps and chains of one kind of external key: an external or LoadBalancer IP (address .
 * proto . port) or a node port (proto . port). Their elements are alike but for these.
 */
interface ExternalKind {
  /** key -> the chain of the traffic policy. */
  readonly policyMap: string;
  /** The policy chains: Cluster (masquerade), Local. */
  readonly clusterChain: string;
  readonly localChain: string;
  /** Policy Cluster's endpoints, and Local's short-circuit of pod and host traffic to them. */
  readonly cluster: DispatchTarget;
  /** Local's own endpoints. */
  readonly local: DispatchTarget;
  /** Where the key goes without usable endpoints. */
  readonly noEndpoint: NoEndpointSets;
}

const EXTERNAL_ADDRESS: ExternalKind = {
  policyMap: SETS.serviceIps.name,
  clusterChain: 'external',
  localChain: 'external-local',
  cluster: CLUSTER,
  local: LOCAL,
  noEndpoint: NO_ENDPOINT_VIPS,
};

const NODE_PORT: ExternalKind = {
  policyMap: SETS.serviceNodePorts.name,
  clusterChain: 'nodeport',
  localChain: 'nodeport-local',
  cluster: NODEPORT_CLUSTER,
  local: NODEPORT_LOCAL,
  noEndpoint: NO_ENDPOINT_NODEPORTS,
};

/**
 * An external key of the port: `address` (absent for a node port) . proto . `port`. No other port
 * holds it: the model gives each to one (address-claims.ts).
 */
function addExternalKey(
  w: PortWrite,
  kind: ExternalKind,
  address: string | undefined,
  port: number,
  what: string,
): void {
  const { builder, sp, decisions: d, sets } = w;
  const key = address === undefined ? `${w.proto} . ${port}` : `${address} . ${w.proto} . ${port}`;
  const comment = fitComment(`${sp.key} ${what}`);
  const counted = countedKeys(w);
  if (d.capturesExternal || counted) {
    const chain = d.masqueradesExternal ? kind.clusterChain : kind.localChain;
    builder.addElement(kind.policyMap, { key, value: `goto ${chain}`, comment });
    // Policy Cluster uses the cluster endpoints; so does Local's short-circuit of pod and host traffic.
    if (sets.cluster.length > 0 || counted) {
      const indexes = w.indexes?.cluster;
      addDispatch(w, { target: kind.cluster, address, port, endpoints: sets.cluster, indexes });
    }
    const local = counted ? !d.masqueradesExternal : d.shortCircuitsLocalTraffic && sets.external.length > 0;
    if (local) {
      const indexes = w.indexes?.external;
      addDispatch(w, { target: kind.local, address, port, endpoints: sets.external, indexes });
    }
  }
  if (d.externalVerdict !== undefined)
    addNoEndpoint(builder, kind.noEndpoint, key, d.externalVerdict, comment);
}

/** Local endpoints reaching themselves through a service must be masqueraded, or replies skip us. */
function addHairpin(builder: RulesetBuilder, sp: ServicePort): void {
  for (const eps of [sp.clusterEndpoints, sp.localEndpoints])
    for (const ep of eps) if (ep.isLocal) builder.addElement(SETS.hairpin.name, hairpinPair(ep));
}

/** The hairpin set's element of a local endpoint. */
export function hairpinPair(ep: Endpoint): ElementSpec {
  return { key: `${ep.ip} . ${ep.ip}` };
}

/**
 * Adds everything one service port needs to the family's ruleset, its endpoints at the indexes
 * `slots` gives them (endpoint-slots.ts; absent: in the model's order). The fragment index
 * (fragment-index.ts) asks for less: of a port whose endpoints alone changed, the endpoint
 * elements at `indexes` only, and no hairpin pairs (it counts them per endpoint itself).
 */
export function addServicePort(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  node: NodeSettings,
  sp: ServicePort,
  slots?: PortSlots,
  indexes?: EndpointIndexes,
  hairpin = true,
): void {
  const decisions = trafficDecisions(sp);
  const proto = sp.protocol.toLowerCase() as L4Protocol;
  const sets = slottedSets(sp, decisions, slots);
  const w: PortWrite = { builder, syntax, node, sp, proto, decisions, sets, indexes };
  addClusterIP(w);
  for (const ip of sp.externalIPs) addExternalKey(w, EXTERNAL_ADDRESS, ip, sp.port, 'external IP');
  for (const ip of sp.loadBalancerIPs) addExternalKey(w, EXTERNAL_ADDRESS, ip, sp.port, 'load balancer IP');
  if (sp.nodePort !== 0) addExternalKey(w, NODE_PORT, undefined, sp.nodePort, 'node port');
  addFirewall(builder, sp, decisions, proto, node);
  if (hairpin) addHairpin(builder, sp);
}
