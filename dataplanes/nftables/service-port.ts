// One service port's elements: its VIPs and node port in the dispatch maps, its endpoints, the
// no-endpoint verdicts and the LoadBalancer firewall. The model's traffic decisions
// (src/model/traffic-decisions.ts) spelled as map elements:
// - a VIP gets a service-ips element only when some traffic to it can be served (for eTP Local
//   that includes the pod/host short-circuit, so the element stays while any endpoint exists);
// - traffic with no usable endpoint meets the decision's verdict, reject-chain or drop.
import type { Endpoint, NodeSettings, ServicePort } from '../../src/model/proxy-state.ts';
import { type TrafficDecisions, trafficDecisions } from '../../src/model/traffic-decisions.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { addFirewall, noEndpointVerdict } from '../shared/nft/service-rules.ts';
import { type ElementSpec, fitComment } from '../shared/nft/transaction.ts';
import { addDispatch } from './endpoint-dispatch.ts';
import { type EndpointIndexes, type EndpointSets, type PortSlots, slottedSets } from './endpoint-slots.ts';
import { CLUSTER, LOCAL, NODEPORT_CLUSTER, NODEPORT_LOCAL, SETS } from './sets.ts';

function addClusterIP(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  sp: ServicePort,
  d: TrafficDecisions,
  sets: EndpointSets,
  indexes: EndpointIndexes | undefined,
  proto: string,
): void {
  if (sp.clusterIP === '') return; // held by an older Service (src/model/address-claims.ts)
  // Shared by the service's ports (a reference count in fragment-index.ts).
  builder.addElement(SETS.clusterIps.name, { key: sp.clusterIP });
  const key = `${sp.clusterIP} . ${proto} . ${sp.port}`;
  const comment = fitComment(sp.key);
  if (d.internalVerdict !== undefined) {
    builder.addElement(SETS.noEndpointServices.name, {
      key,
      value: noEndpointVerdict(d.internalVerdict),
      comment,
    });
    return;
  }
  builder.addElement(SETS.serviceIps.name, { key, value: 'goto cluster-ip', comment });
  addDispatch(builder, syntax, sp, CLUSTER, sp.clusterIP, sp.port, sets.internal, indexes?.internal);
}

function addExternalAddress(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  sp: ServicePort,
  d: TrafficDecisions,
  sets: EndpointSets,
  indexes: EndpointIndexes | undefined,
  proto: string,
  address: string,
  what: string,
): void {
  // No other port holds this address:port/protocol: the model gives it to one (address-claims.ts).
  const key = `${address} . ${proto} . ${sp.port}`;
  const comment = fitComment(`${sp.key} ${what}`);
  if (d.capturesExternal) {
    builder.addElement(SETS.serviceIps.name, {
      key,
      value: d.masqueradesExternal ? 'goto external' : 'goto external-local',
      comment,
    });
    // Policy Cluster uses the cluster endpoints; so does Local's short-circuit of pod and host traffic.
    if (sets.cluster.length > 0)
      addDispatch(builder, syntax, sp, CLUSTER, address, sp.port, sets.cluster, indexes?.cluster);
    if (d.shortCircuitsLocalTraffic && sets.external.length > 0) {
      addDispatch(builder, syntax, sp, LOCAL, address, sp.port, sets.external, indexes?.external);
    }
  }
  if (d.externalVerdict !== undefined) {
    builder.addElement(SETS.noEndpointServices.name, {
      key,
      value: noEndpointVerdict(d.externalVerdict),
      comment,
    });
  }
}

function addNodePort(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  sp: ServicePort,
  d: TrafficDecisions,
  sets: EndpointSets,
  indexes: EndpointIndexes | undefined,
  proto: string,
): void {
  // No other port holds this node port/protocol: the model gives it to one (address-claims.ts).
  const key = `${proto} . ${sp.nodePort}`;
  const comment = fitComment(`${sp.key} node port`);
  if (d.capturesExternal) {
    builder.addElement(SETS.serviceNodePorts.name, {
      key,
      value: d.masqueradesExternal ? 'goto nodeport' : 'goto nodeport-local',
      comment,
    });
    if (sets.cluster.length > 0) {
      addDispatch(
        builder,
        syntax,
        sp,
        NODEPORT_CLUSTER,
        undefined,
        sp.nodePort,
        sets.cluster,
        indexes?.cluster,
      );
    }
    if (d.shortCircuitsLocalTraffic && sets.external.length > 0) {
      addDispatch(
        builder,
        syntax,
        sp,
        NODEPORT_LOCAL,
        undefined,
        sp.nodePort,
        sets.external,
        indexes?.external,
      );
    }
  }
  if (d.externalVerdict !== undefined) {
    builder.addElement(SETS.noEndpointNodePorts.name, {
      key,
      value: noEndpointVerdict(d.externalVerdict),
      comment,
    });
  }
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
  const proto = sp.protocol.toLowerCase();
  const d = trafficDecisions(sp);
  const sets = slottedSets(sp, d, slots);
  addClusterIP(builder, syntax, sp, d, sets, indexes, proto);
  for (const ip of sp.externalIPs)
    addExternalAddress(builder, syntax, sp, d, sets, indexes, proto, ip, 'external IP');
  for (const ip of sp.loadBalancerIPs)
    addExternalAddress(builder, syntax, sp, d, sets, indexes, proto, ip, 'load balancer IP');
  if (sp.nodePort !== 0) addNodePort(builder, syntax, sp, d, sets, indexes, proto);
  addFirewall(builder, sp, d, proto, node);
  if (hairpin) addHairpin(builder, sp);
}
