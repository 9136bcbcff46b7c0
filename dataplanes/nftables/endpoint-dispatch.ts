// Picking one endpoint for a key (VIP . proto . port, or proto . port for node ports).
// The key's endpoints become elements of a global map per protocol (VIP . port . index ->
// endpoint), and the key is sent to a chain shared by every key with the same protocol and
// endpoint count:
//   backends-tcp-3: meta l4proto tcp dnat to ip daddr . ct original proto-dst . numgen random mod 3 map @backends-tcp
// so the chain count is bounded by the number of distinct endpoint counts, not by services.
// A count up to COUNTED_UP_TO is not in the key's dispatch element but in a data map
// (`backends-tcp-counts`: VIP . port -> N), and the element sends every such key to one chain:
//   backends-tcp-counted: tcp dport set ip daddr . tcp dport map @backends-tcp-counts
//                         tcp dport vmap { 1 : goto backends-tcp-1, … }
// (the header's destination port is scratch, as in affinity.ts: NAT rewrites it from conntrack,
// hence `ct original proto-dst` in the count chains). Those chains are written by every full
// sync, so a count change within the bound replaces one data element: a chain added, or an
// element with a chain verdict, makes the kernel validate the whole table at commit (README,
// "What each shape costs in the kernel"). A key missing from the counts map breaks the rule at
// the lookup: no DNAT, header untouched. A count above the bound has its dispatch element
// name its chain, added while some key has that count.
// With the node's endpointHash 'source' (IPVS's sh) the index is a hash of the client address
// instead, `jhash ip saddr mod 3 seed 0x6b70726f`, and every count goes through its own dispatch
// element: the seed is fixed, so every node and every restart sends one client to the same index
// (the kernel would draw a seed at random). With
// 'consistent' (IPVS's mh) the key has MAGLEV_SLOTS elements, slot -> endpoint by a Maglev table
// (maglev.ts), and one chain per protocol hashes the client address into a slot:
//   backends-tcp-consistent: dnat to ip daddr . tcp dport . jhash ip saddr mod 127 seed ... map @backends-tcp
// An endpoint change rewrites only the slots whose owner changed (the fragment plan's diff).

import type { NodeSettings } from '../../contract/proxy-state.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import { type ChainSpec, fitComment } from '../shared/nft/transaction.ts';
import { addAffinityDispatch } from './affinity.ts';
import { forEachIndex } from './endpoint-slots.ts';
import { MAGLEV_SLOTS, maglevTable } from './maglev.ts';
import type { DispatchKey, PortWrite } from './port-write.ts';
import { countsMap, DISPATCH_TARGETS, type DispatchTarget, L4_PROTOCOLS, type L4Protocol } from './sets.ts';

/**
 * Counts whose chains every full sync writes (endpointHash random): a key with up to this many
 * endpoints changes count by one data element. Above it a new count adds its chain, as before.
 */
export const COUNTED_UP_TO = 16;

/**
 * Sends traffic for `key` to one of its endpoints. With ClientIP affinity the endpoints go to the
 * affinity maps and the key to an affinity count chain instead (affinity.ts).
 */
export function addDispatch(w: PortWrite, key: DispatchKey): void {
  const { builder, sp, proto } = w;
  const { target, address, port, endpoints } = key;
  if (endpoints.length === 0 && !countedKeys(w)) throw new Error(`dispatch of ${sp.key} without endpoints`);
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
  const count = endpoints.length;
  if (w.node.endpointHash === undefined && count <= COUNTED_UP_TO) {
    builder.addElement(target.dispatchMap, { key: element, value: `goto ${backends}-counted`, comment });
    // No count without endpoints: the lookup misses, so no DNAT (service-port.ts keeps the keys).
    if (count > 0)
      builder.addElement(countsMap(target, proto), { key: `${prefix}${port}`, value: String(count) });
  } else {
    const chain = countChain(w.syntax, w.node, target, proto, count);
    builder.addChain(chain);
    builder.addElement(target.dispatchMap, { key: element, value: `goto ${chain.name}`, comment });
  }
  forEachIndex(endpoints, key.indexes, (ep, i) => {
    builder.addElement(backends, { key: `${prefix}${port} . ${i}`, value: `${ep.ip} . ${ep.port}` });
  });
}

/**
 * The port's keys dispatch through the counted chains whatever their count (endpointHash random,
 * no ClientIP affinity), so service-port.ts writes them while the port exists.
 */
export function countedKeys({ node, sp }: PortWrite): boolean {
  return node.endpointHash === undefined && sp.sessionAffinity === undefined;
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

/** The chain of `count` endpoints of `target`'s keys of `proto`. */
function countChain(
  syntax: FamilySyntax,
  node: NodeSettings,
  target: DispatchTarget,
  proto: L4Protocol,
  count: number,
): ChainSpec {
  const backends = `${target.backendsMap}-${proto}`;
  const name = `${backends}-${count}`;
  if (node.endpointHash === 'source') {
    const key = target.nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
    return {
      name,
      comment: `dnat to one of ${count} endpoints of the key in @${backends}, by client address`,
      rules: [
        `dnat ${syntax.ip} to ${key} . jhash ${syntax.ip} saddr mod ${count} seed ${SOURCE_HASH_SEED} map @${backends}`,
      ],
    };
  }
  // The port from conntrack: the counted chain left the key's count in the header.
  const port = 'ct original proto-dst';
  const key = target.nodePort ? port : `${syntax.ip} daddr . ${port}`;
  return {
    name,
    comment: `dnat to one of ${count} endpoints of the key in @${backends}`,
    rules: [
      `meta l4proto ${proto} dnat ${syntax.ip} to ${key} . numgen random mod ${count} map @${backends}`,
    ],
  };
}

/**
 * The chains of counted dispatch (endpointHash random), written by every full sync: per target and
 * protocol, the chain reading a key's count and the count chains up to COUNTED_UP_TO.
 */
export function countedChains(syntax: FamilySyntax, node: NodeSettings): ChainSpec[] {
  if (node.endpointHash !== undefined) return [];
  return DISPATCH_TARGETS.flatMap((target) =>
    L4_PROTOCOLS.flatMap((proto) => {
      const backends = `${target.backendsMap}-${proto}`;
      const key = target.nodePort ? `${proto} dport` : `${syntax.ip} daddr . ${proto} dport`;
      const counts = Array.from({ length: COUNTED_UP_TO }, (_, i) =>
        countChain(syntax, node, target, proto, i + 1),
      );
      const verdicts = counts.map((c, i) => `${i + 1} : goto ${c.name}`).join(', ');
      const counted: ChainSpec = {
        name: `${backends}-counted`,
        comment: `the key's count from @${countsMap(target, proto)} (in the header's port) picks its count chain`,
        rules: [
          `${proto} dport set ${key} map @${countsMap(target, proto)} ${proto} dport vmap { ${verdicts} }`,
        ],
      };
      return [counted, ...counts];
    }),
  );
}
