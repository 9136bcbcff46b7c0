// Picking one endpoint for a key (VIP . proto . port, or proto . port for node ports).
// The key's endpoints become elements of a global map per protocol (VIP . port . index ->
// endpoint), and the key is sent to a chain shared by every key with the same protocol and
// endpoint count:
//   backends-tcp-3: dnat to ip daddr . tcp dport . numgen random mod 3 map @backends-tcp
// so the chain count is bounded by the number of distinct endpoint counts, not by services.
import type { Endpoint, ServicePort } from '../../contract/proxy-state.ts';
import type { TrafficDecisions } from '../../contract/traffic-decisions.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { fitComment } from '../shared/nft/transaction.ts';
import { addAffinityDispatch } from './affinity.ts';
import { type EndpointIndexes, type EndpointSets, forEachIndex } from './endpoint-slots.ts';
import type { DispatchTarget, L4Protocol } from './sets.ts';

/** The service port being written into a family's ruleset: what each writer of its elements needs. */
export interface PortWrite {
  readonly builder: RulesetBuilder;
  readonly syntax: FamilySyntax;
  readonly sp: ServicePort;
  /** The port's protocol in nft's words. */
  readonly proto: L4Protocol;
  readonly decisions: TrafficDecisions;
  /** Its endpoints, in slot order (endpoint-slots.ts). */
  readonly sets: EndpointSets;
  /** Only the endpoint elements at these indexes (those an endpoint change rewrites), else all. */
  readonly indexes: EndpointIndexes | undefined;
}

/** A key of the port to send to one of `endpoints` (non-empty): `address` (absent for a node port) . proto . `port`. */
export interface DispatchKey {
  readonly target: DispatchTarget;
  readonly address: string | undefined;
  readonly port: number;
  readonly endpoints: readonly Endpoint[];
  /** Only the elements of the endpoints at these indexes, else all. */
  readonly indexes: readonly number[] | undefined;
}

/**
 * Sends traffic for `key` to one of its endpoints. With ClientIP affinity the endpoints go to the
 * affinity maps and the key to an affinity count chain instead (affinity.ts).
 */
export function addDispatch(w: PortWrite, key: DispatchKey): void {
  const { builder, syntax, sp, proto } = w;
  const { target, address, port, endpoints } = key;
  if (endpoints.length === 0) throw new Error(`dispatch of ${sp.key} without endpoints`);
  const prefix = address === undefined ? '' : `${address} . `;
  const element = `${prefix}${proto} . ${port}`;
  const comment = fitComment(sp.key);
  if (sp.sessionAffinity) {
    const chain = addAffinityDispatch(w, key);
    builder.addElement(target.dispatchMap, { key: element, value: `goto ${chain}`, comment });
    return;
  }
  const backends = `${target.backendsMap}-${proto}`;
  const chain = addCountChain(builder, syntax, target, backends, proto, endpoints.length);
  builder.addElement(target.dispatchMap, { key: element, value: `goto ${chain}`, comment });
  forEachIndex(endpoints, key.indexes, (ep, i) => {
    builder.addElement(backends, { key: `${prefix}${port} . ${i}`, value: `${ep.ip} . ${ep.port}` });
  });
}

function addCountChain(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  target: DispatchTarget,
  backends: string,
  proto: L4Protocol,
  count: number,
): string {
  const name = `${backends}-${count}`;
  const key = target.nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
  builder.addChain({
    name,
    comment: `dnat to one of ${count} endpoints of the key in @${backends}`,
    rules: [`dnat ${syntax.ip} to ${key} . numgen random mod ${count} map @${backends}`],
  });
  return name;
}
