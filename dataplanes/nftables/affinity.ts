// Session affinity (ClientIP) in a fixed number of sets, maps and chains, whatever the number of
// services (one named set per endpoint, kube-proxy's shape, made loading quadratic: the kernel
// finds a set by name in a list).
//
// State: one dynamic set per family, `affinity-clients`, of client . service address . proto .
// port . endpoint address, written after DNAT (the endpoint is known only then) with the
// service's timeout: `affinity-timeouts` sends a new connection to its service's
// `affinity-record-<seconds>` chain, one per distinct timeout.
//
// Choice: a key with N endpoints goes to the chain of its target, protocol and N, as without
// affinity. Endpoint i of the key is in `affinity-<target>-ips` (key . i -> address); the chain
// jumps to the checks for a remembered one, shared by the counts up to a power of two
// (`…-remembered-<bucket>`, by the rules shared with the IPVS companion,
// dataplanes/shared/nft/affinity.ts: the header as scratch). Otherwise it picks one at random,
// as without affinity (nf_nat rewrites the header from the conntrack tuple, so the scratch values
// never leave the hook). Either way it DNATs to the scratch address and the key's one port in
// `affinity-<target>-ports` (key -> port): one element per endpoint, as without affinity (the
// load time follows the element count). A key whose endpoints differ in port (a named target
// port) has its endpoints' address . port in `affinity-<target>` (key . i) instead, and a
// `…-mixed` chain DNATs by index.
// So, as in kube-proxy: a client keeps its endpoint for the timeout after its last new
// connection; an endpoint that goes away (or is terminating, not ready) is never in the maps, so
// its clients choose again; other endpoints keep theirs. Differences: stickiness is per service
// address (a ClusterIP and a node port of one service port are remembered apart), an endpoint is
// known by its address (two endpoints of one key on one address share clients), and a changed
// timeout applies from a client's next connection.
import {
  affinityClientsSet,
  affinityRecordChain,
  dnatByIndex,
  rememberedEndpointRules,
} from '../shared/nft/affinity.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { ChainSpec, SetSpec } from '../shared/nft/transaction.ts';
import { forEachIndex } from './endpoint-slots.ts';
import type { DispatchKey, PortWrite } from './port-write.ts';
import { DISPATCH_TARGETS, type DispatchTarget, type L4Protocol, SETS } from './sets.ts';

/** The service side of a new connection, from conntrack (the packet's header is scratch). */
function serviceKey(syntax: FamilySyntax, nodePort: boolean): string {
  const port = 'meta l4proto . ct original proto-dst';
  return nodePort ? port : `ct original ${syntax.ip} daddr . ${port}`;
}

/** The fixed sets and maps of affinity. */
export function affinitySets(syntax: FamilySyntax): SetSpec[] {
  const addr = syntax.addrType;
  const maps = DISPATCH_TARGETS.flatMap(({ affinityMap, nodePort }): SetSpec[] => {
    const key = nodePort
      ? 'inet_proto . inet_service . inet_service'
      : `${addr} . inet_proto . inet_service . inet_service`;
    const what = nodePort ? 'node port' : 'VIP . proto . port';
    return [
      {
        name: affinityMap,
        kind: 'map',
        type: `type ${key} : ${addr} . inet_service`,
        comment: `ClientIP ${what} . index -> endpoint (endpoints on several ports)`,
      },
      {
        name: `${affinityMap}-ips`,
        kind: 'map',
        type: `type ${key} : ${addr}`,
        comment: `ClientIP ${what} . index -> endpoint address`,
      },
      {
        name: `${affinityMap}-ports`,
        kind: 'map',
        type: `type ${key.slice(0, key.lastIndexOf(' . '))} : inet_service`,
        comment: `ClientIP ${what} -> the port of all its endpoints`,
      },
    ];
  });
  return [
    affinityClientsSet(syntax),
    {
      name: SETS.affinityTimeouts.name,
      kind: 'map',
      type: `type ${addr} . inet_proto . inet_service : verdict`,
      comment: 'ClientIP VIP . proto . port -> chain remembering its clients',
    },
    {
      name: SETS.affinityNodePortTimeouts.name,
      kind: 'map',
      type: 'type inet_proto . inet_service : verdict',
      comment: 'ClientIP node port -> chain remembering its clients',
    },
    ...maps,
  ];
}

/** The fixed chains of affinity: recording a new DNATed connection's endpoint. */
export function affinityChains(syntax: FamilySyntax): ChainSpec[] {
  const ip = syntax.ip;
  const record = 'ct state new ct status dnat jump affinity-record';
  return [
    {
      name: 'filter-prerouting-post-dnat',
      comment: 'ClientIP affinity: remember the endpoint of a new connection',
      base: { type: 'filter', hook: 'prerouting', priority: '-90' },
      rules: [record],
    },
    {
      // `ct original proto-dst` needs a protocol to have a type: a rule per protocol.
      name: 'affinity-record',
      comment: 'send a new ClientIP connection to the chain of its timeout',
      rules: (['tcp', 'udp', 'sctp'] as const).flatMap((p) => [
        `meta l4proto ${p} ct original ${ip} daddr . meta l4proto . ct original proto-dst vmap @${SETS.affinityTimeouts.name}`,
        `meta l4proto ${p} meta l4proto . ct original proto-dst vmap @${SETS.affinityNodePortTimeouts.name}`,
      ]),
    },
  ];
}

/** The rule of filter-output-post-dnat recording host connections (see affinityChains). */
export const RECORD_HOST_CONNECTIONS = 'ct state new ct status dnat jump affinity-record';

/**
 * The remembered-endpoint checks are shared by every count up to a power of two (a check past the
 * key's last index finds no address in `…-ips` and falls through), so a key whose endpoint count
 * changes within its bucket gets a two-rule count chain, as a plain key gets a one-rule one: at
 * 3,000 services the checks of a new count (three lookups each) cost the change ~6 ms of nft's
 * CPU, more than the elements (docs/benchmarks-log.md, issue 16). A new connection runs at most
 * 2N-1 checks.
 */
function rememberedBucket(count: number): number {
  let bucket = 1;
  while (bucket < count) bucket *= 2;
  return bucket;
}

/** How a count chain of `target` DNATs: to the key's one port, or by index (several ports). */
interface ChainShape {
  readonly map: string;
  readonly service: string;
  readonly dnat: string;
  readonly suffix: '' | '-mixed';
}

function chainShape(
  syntax: FamilySyntax,
  target: DispatchTarget,
  proto: L4Protocol,
  onePort: boolean,
): ChainShape {
  const ip = syntax.ip;
  const map = target.affinityMap;
  const service = serviceKey(syntax, target.nodePort);
  const dnat = onePort
    ? `dnat ${ip} to ${ip} daddr : ${service} map @${map}-ports`
    : dnatByIndex(syntax, proto, service, map);
  return { map, service, dnat, suffix: onePort ? '' : '-mixed' };
}

/** `…-remembered-<bucket>`: DNAT to the endpoint, among the key's first `bucket`, the client has. */
function rememberedChain(
  syntax: FamilySyntax,
  shape: ChainShape,
  proto: L4Protocol,
  bucket: number,
): ChainSpec {
  return {
    name: `${shape.map}-${proto}-remembered-${bucket}${shape.suffix}`,
    comment: `ClientIP: the remembered one of up to ${bucket} endpoints of the key${shape.suffix ? ' (several ports)' : ''}`,
    rules: rememberedEndpointRules(syntax, proto, bucket, shape.service, `${shape.map}-ips`, shape.dnat),
  };
}

/** The chain of `count` endpoints: the remembered one (`remembered`), else a random one. */
function countChain(
  syntax: FamilySyntax,
  proto: L4Protocol,
  count: number,
  shape: ChainShape,
  remembered: ChainSpec,
): ChainSpec {
  const ip = syntax.ip;
  const { map, service, dnat, suffix } = shape;
  // numgen gives a host-order word; the anonymous map turns it into a port-typed index.
  const indexes = Array.from({ length: count }, (_, i) => `${i} : ${i}`).join(', ');
  const pick = `${proto} dport set numgen random mod ${count} map { ${indexes} }`;
  return {
    name: `${map}-${proto}-${count}${suffix}`,
    comment: `ClientIP: the remembered one of ${count} endpoints of the key${suffix ? ' (several ports)' : ''}, else any`,
    rules: [
      `jump ${remembered.name}`,
      suffix
        ? `meta l4proto ${proto} ${ip} daddr set ct original ${ip} daddr ${pick} ${dnat}`
        : `meta l4proto ${proto} ${pick} ${ip} daddr set ${service} . ${proto} dport map @${map}-ips ${dnat}`,
    ],
  };
}

/**
 * Adds the elements and shared chains of a ClientIP key (addDispatch); returns the chain its
 * dispatch element goes to.
 */
export function addAffinityDispatch(w: PortWrite, dispatch: DispatchKey): string {
  const { builder, syntax, sp, proto } = w;
  const { target, address, port, endpoints } = dispatch;
  const seconds = sp.sessionAffinity?.timeoutSeconds;
  if (seconds === undefined) throw new Error(`${sp.key} has no session affinity`);
  const record = affinityRecordChain(syntax, seconds);
  builder.addChain(record);
  const key = address === undefined ? `${proto} . ${port}` : `${address} . ${proto} . ${port}`;
  const timeouts = (address === undefined ? SETS.affinityNodePortTimeouts : SETS.affinityTimeouts).name;
  builder.addElement(timeouts, { key, value: `goto ${record.name}` });
  const map = target.affinityMap;
  const first = endpoints.at(0)!;
  const onePort = endpoints.every((ep) => ep.port === first.port);
  if (onePort) builder.addElement(`${map}-ports`, { key, value: String(first.port) });
  forEachIndex(endpoints, dispatch.indexes, (ep, i) => {
    builder.addElement(`${map}-ips`, { key: `${key} . ${i}`, value: ep.ip });
    if (!onePort) builder.addElement(map, { key: `${key} . ${i}`, value: `${ep.ip} . ${ep.port}` });
  });
  const shape = chainShape(syntax, target, proto, onePort);
  const remembered = rememberedChain(syntax, shape, proto, rememberedBucket(endpoints.length));
  const chain = countChain(syntax, proto, endpoints.length, shape, remembered);
  builder.addChain(remembered);
  builder.addChain(chain);
  return chain.name;
}
