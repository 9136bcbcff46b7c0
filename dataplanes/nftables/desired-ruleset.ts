// ProxyState -> the ruleset kproxy wants in the kernel, per family.

import { runAll, type Steps } from '../../contract/base/work-slices.ts';
import type { DualStackState, NodeSettings, ProxyState } from '../../contract/proxy-state.ts';
import { cidrContains } from '../shared/cidr.ts';
import { type FamilySyntax, familySyntax } from '../shared/nft/family-syntax.ts';
import { type DesiredRuleset, type FamilyRuleset, RulesetBuilder } from '../shared/nft/ruleset.ts';
import type { NftFamily } from '../shared/nft/transaction.ts';
import { addBaseObjects } from './base-objects.ts';
import type { SlotTable } from './endpoint-slots.ts';
import { addServicePort } from './service-port.ts';
import { SETS } from './sets.ts';

/** This node's addresses that serve node ports, when limited by --nodeport-addresses. */
function addNodePortAddresses(builder: RulesetBuilder, node: NodeSettings): void {
  const cidrs = node.nodePortAddresses;
  if (cidrs === 'all') return;
  for (const ip of node.nodeIPs) {
    if (cidrs.some((cidr) => cidrContains(cidr, ip))) builder.addElement(SETS.nodePortIps.name, { key: ip });
  }
}

/** A builder holding what a family's table has before any service port: depends on the node only. */
export function baseBuilder(node: NodeSettings, syntax: FamilySyntax): RulesetBuilder {
  const builder = new RulesetBuilder(syntax.family);
  addBaseObjects(builder, syntax, node);
  addNodePortAddresses(builder, node);
  return builder;
}

/** Endpoint slots by family (endpoint-slots.ts): a family without a table numbers in model order. */
export type FamilySlots = ReadonlyMap<NftFamily, SlotTable>;

/** Pauses after each service port (work-slices.ts). */
function* familyRuleset(state: ProxyState, syntax: FamilySyntax, slots?: SlotTable): Steps<FamilyRuleset> {
  const builder = baseBuilder(state.node, syntax);
  for (const sp of state.servicePorts.values()) {
    addServicePort(builder, syntax, state.node, sp, slots?.get(sp.key));
    yield;
  }
  return builder.build();
}

/**
 * The desired ruleset of `state`, endpoints at their `slots` (absent: in the model's order, as a
 * full sync numbers them), computed in steps: the live dataplane runs them in slices.
 */
export function* desiredRulesetSteps(state: DualStackState, slots?: FamilySlots): Steps<DesiredRuleset> {
  const ip = state.IPv4 && (yield* familyRuleset(state.IPv4, familySyntax('IPv4'), slots?.get('ip')));
  const ip6 = state.IPv6 && (yield* familyRuleset(state.IPv6, familySyntax('IPv6'), slots?.get('ip6')));
  return { ...(ip && { ip }), ...(ip6 && { ip6 }) };
}

export function desiredRuleset(state: DualStackState): DesiredRuleset {
  return runAll(desiredRulesetSteps(state));
}
