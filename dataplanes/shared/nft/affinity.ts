// ClientIP affinity pieces both nft tables spell alike (kproxy's nftables table and the IPVS
// companion): the dynamic set of remembered clients, the chain remembering a client's endpoint
// for a timeout, and the rules finding a remembered endpoint among a key's N.
//
// nft 1.0.6 can neither put a constant nor a map's result into a lookup key, so the finding rules
// use the packet's header as their scratch register: for each i they write i into the
// destination port and endpoint i's address into the destination address, and DNAT to endpoint i
// when client . service . that address is in the set. The service side of every key comes from
// conntrack (`ct original`), which the writes leave alone.
import type { FamilySyntax } from './family-syntax.ts';
import type { ChainSpec, SetSpec } from './transaction.ts';

export const AFFINITY_CLIENTS = 'affinity-clients';

/** Clients remembered per family; a full set remembers no new client (they are balanced). */
const CLIENTS_SIZE = 1_048_576;

export type AffinityProtocol = 'tcp' | 'udp' | 'sctp';

export const AFFINITY_PROTOCOLS: readonly AffinityProtocol[] = ['tcp', 'udp', 'sctp'];

/** client . service address . proto . port . endpoint address of a connection past DNAT. */
export function affinityClientKey(syntax: FamilySyntax): string {
  const ip = syntax.ip;
  return `${ip} saddr . ct original ${ip} daddr . meta l4proto . ct original proto-dst . ${ip} daddr`;
}

export function affinityClientsSet(syntax: FamilySyntax): SetSpec {
  const addr = syntax.addrType;
  return {
    name: AFFINITY_CLIENTS,
    kind: 'set',
    type: `type ${addr} . ${addr} . inet_proto . inet_service . ${addr}`,
    flags: ['dynamic', 'timeout'],
    size: CLIENTS_SIZE,
    comment: 'client . service address . proto . port . endpoint address, until the timeout',
  };
}

/** `affinity-record-<seconds>`: remembers a new connection's client and endpoint. */
export function affinityRecordChain(syntax: FamilySyntax, seconds: number): ChainSpec {
  return {
    name: `affinity-record-${seconds}`,
    comment: `remember a ClientIP client's endpoint for ${seconds}s`,
    // `ct original proto-dst` needs a protocol to have a type: a rule per protocol.
    rules: AFFINITY_PROTOCOLS.map(
      (p) =>
        `meta l4proto ${p} update @${AFFINITY_CLIENTS} { ${affinityClientKey(syntax)} timeout ${seconds}s }`,
    ),
  };
}

/** DNAT to the endpoint (address . port) of key . index in `map`, the index in the scratch port. */
export function dnatByIndex(
  syntax: FamilySyntax,
  proto: AffinityProtocol,
  service: string,
  map: string,
): string {
  return `dnat ${syntax.ip} to ${service} . ${proto} dport map @${map}`;
}

/**
 * For each of `count` endpoints: `dnat` (to endpoint i, the scratch header holding i and its
 * address) when the client has it remembered. `service` is the key expression of the service side
 * (from conntrack); `ips` maps key . i to the endpoint address.
 */
export function rememberedEndpointRules(
  syntax: FamilySyntax,
  proto: AffinityProtocol,
  count: number,
  service: string,
  ips: string,
  dnat: string,
): string[] {
  const ip = syntax.ip;
  return Array.from(
    { length: count },
    (_, i) =>
      `meta l4proto ${proto} ${proto} dport set ${i} ${ip} daddr set ${service} . ${proto} dport map @${ips} ` +
      `${affinityClientKey(syntax)} @${AFFINITY_CLIENTS} ${dnat}`,
  );
}
