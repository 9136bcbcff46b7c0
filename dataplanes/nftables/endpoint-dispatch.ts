// Picking one endpoint for a key (VIP . proto . port, or proto . port for node ports).
// The key's endpoints become elements of a global map per protocol (VIP . port . index ->
// endpoint), and the key is sent to a chain shared by every key with the same protocol and
// endpoint count:
//   backends-tcp-3: dnat to ip daddr . tcp dport . numgen random mod 3 map @backends-tcp
// so the chain count is bounded by the number of distinct endpoint counts, not by services.
import type { Endpoint, ServicePort } from '../../src/model/proxy-state.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { fitComment } from '../shared/nft/transaction.ts';
import { addAffinityDispatch } from './affinity.ts';
import { forEachIndex } from './endpoint-slots.ts';
import type { DispatchTarget, L4Protocol } from './sets.ts';

/**
 * Sends traffic for `address` (absent for a node port) . protocol . `port` of `target` to one of
 * `endpoints` (non-empty). With ClientIP affinity the endpoints go to the affinity maps and the
 * key to an affinity count chain instead (affinity.ts). `indexes`: only the elements of the
 * endpoints at these indexes (those an endpoint change rewrites, endpoint-slots.ts), else all.
 */
export function addDispatch(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  servicePort: ServicePort,
  target: DispatchTarget,
  address: string | undefined,
  port: number,
  endpoints: readonly Endpoint[],
  indexes?: readonly number[],
): void {
  if (endpoints.length === 0) throw new Error(`dispatch of ${servicePort.key} without endpoints`);
  const proto = servicePort.protocol.toLowerCase() as L4Protocol;
  const prefix = address === undefined ? '' : `${address} . `;
  const key = `${prefix}${proto} . ${port}`;
  const comment = fitComment(servicePort.key);
  if (servicePort.sessionAffinity) {
    const chain = addAffinityDispatch(
      builder,
      syntax,
      servicePort,
      target,
      address,
      port,
      endpoints,
      indexes,
    );
    builder.addElement(target.dispatchMap, { key, value: `goto ${chain}`, comment });
    return;
  }
  const backends = `${target.backendsMap}-${proto}`;
  const chain = addCountChain(builder, syntax, target, backends, proto, endpoints.length);
  builder.addElement(target.dispatchMap, { key, value: `goto ${chain}`, comment });
  forEachIndex(endpoints, indexes, (ep, i) => {
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
