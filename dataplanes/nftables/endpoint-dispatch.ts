// Picking one endpoint for a key (VIP . proto . port, or proto . port for node ports).
// The key's endpoints become elements of a global map per protocol (VIP . port . index ->
// endpoint), and the key is sent to a chain shared by every key with the same protocol and
// endpoint count:
//   backends-tcp-3: dnat to ip daddr . tcp dport . numgen random mod 3 map @backends-tcp
// so the chain count is bounded by the number of distinct endpoint counts, not by services.
// With the node's endpointHash 'source' (IPVS's sh) the index is a hash of the client address
// instead, `jhash ip saddr mod 3 seed 0x6b70726f`: the seed is fixed, so every node and every
// restart sends one client to the same index (the kernel would draw a seed at random). With
// 'consistent' (IPVS's mh) the key has MAGLEV_SLOTS elements, slot -> endpoint by a Maglev table
// (maglev.ts), and one chain per protocol hashes the client address into a slot:
//   backends-tcp-consistent: dnat to ip daddr . tcp dport . jhash ip saddr mod 127 seed ... map @backends-tcp
// An endpoint change rewrites only the slots whose owner changed (the fragment plan's diff).
import { fitComment } from '../shared/nft/transaction.ts';
import { addAffinityDispatch } from './affinity.ts';
import { forEachIndex } from './endpoint-slots.ts';
import { MAGLEV_SLOTS, maglevTable } from './maglev.ts';
import type { DispatchKey, PortWrite } from './port-write.ts';
import type { DispatchTarget } from './sets.ts';

/**
 * Sends traffic for `key` to one of its endpoints. With ClientIP affinity the endpoints go to the
 * affinity maps and the key to an affinity count chain instead (affinity.ts).
 */
export function addDispatch(w: PortWrite, key: DispatchKey): void {
  const { builder, sp, proto } = w;
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
  if (w.node.endpointHash === 'consistent') {
    const chain = addConsistentChain(w, target, backends);
    builder.addElement(target.dispatchMap, { key: element, value: `goto ${chain}`, comment });
    const table = maglevTable(endpoints.map((ep) => `${ep.ip}:${ep.port}`));
    for (let slot = 0; slot < table.length; slot++) {
      const ep = endpoints.at(table[slot]!)!;
      builder.addElement(backends, { key: `${prefix}${port} . ${slot}`, value: `${ep.ip} . ${ep.port}` });
    }
    return;
  }
  const chain = addCountChain(w, target, backends, endpoints.length);
  builder.addElement(target.dispatchMap, { key: element, value: `goto ${chain}`, comment });
  forEachIndex(endpoints, key.indexes, (ep, i) => {
    builder.addElement(backends, { key: `${prefix}${port} . ${i}`, value: `${ep.ip} . ${ep.port}` });
  });
}

/** The chain that hashes a client into one of a key's Maglev slots (one per protocol and target). */
function addConsistentChain(
  { builder, syntax, proto }: PortWrite,
  target: DispatchTarget,
  backends: string,
): string {
  const name = `${backends}-consistent`;
  const key = target.nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
  builder.addChain({
    name,
    comment: `dnat to the endpoint of the client's Maglev slot of the key in @${backends}`,
    rules: [
      `dnat ${syntax.ip} to ${key} . jhash ${syntax.ip} saddr mod ${MAGLEV_SLOTS} seed ${SOURCE_HASH_SEED} map @${backends}`,
    ],
  });
  return name;
}

/** The seed of the source hash: "kpro". */
export const SOURCE_HASH_SEED = '0x6b70726f';

function addCountChain(
  { builder, syntax, node, proto }: PortWrite,
  target: DispatchTarget,
  backends: string,
  count: number,
): string {
  const name = `${backends}-${count}`;
  const key = target.nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
  const index =
    node.endpointHash === 'source'
      ? `jhash ${syntax.ip} saddr mod ${count} seed ${SOURCE_HASH_SEED}`
      : `numgen random mod ${count}`;
  const by = node.endpointHash === 'source' ? ', by client address' : '';
  builder.addChain({
    name,
    comment: `dnat to one of ${count} endpoints of the key in @${backends}${by}`,
    rules: [`dnat ${syntax.ip} to ${key} . ${index} map @${backends}`],
  });
  return name;
}
