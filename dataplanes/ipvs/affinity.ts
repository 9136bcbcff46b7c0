// ClientIP affinity in the companion table, with IPVS not persistent: IPVS persistence keeps a
// client on its server long past the Service's timeout (a template that controls a connection,
// even one in TIME_WAIT, is re-armed for 60 s instead of expiring; kubernetes#89358, README.md).
//
// Remember: at postrouting (filter, priority 90: before the masquerade at srcnat) a new
// connection to an affinity virtual server carries its real server as destination and the VIP in
// `ct original` (net.ipv4.vs.conntrack=1); `affinity-timeouts` sends it to the chain of its
// timeout, which updates `affinity-clients` (shared with the nftables mode). Steered connections
// pass there too: a client keeps its server for T after its last new connection.
//
// Steer: at nat prerouting/output (priority -100, before IPVS at LOCAL_IN/LOCAL_OUT) a new
// connection to an affinity virtual server goes by `affinity-counts` to the chain of its protocol
// and N real servers, which first applies the source ranges (a DNATed connection is forwarded and
// never meets filter-input), then DNATs to the remembered real server if any (the shared rules:
// the header as scratch register), else writes the original destination back and returns: IPVS
// schedules it and postrouting remembers IPVS's choice. The maps hold the virtual server's
// real servers at weight 1, so a removed, draining or terminating one is never steered to.
import { compareText } from '../../contract/base/compare-text.ts';
import type { ProxyState } from '../../contract/proxy-state.ts';
import {
  AFFINITY_PROTOCOLS,
  type AffinityProtocol,
  affinityClientsSet,
  affinityRecordChain,
  dnatByIndex,
  rememberedEndpointRules,
} from '../shared/nft/affinity.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import { vipKey } from '../shared/nft/service-rules.ts';
import type { ChainSpec, SetSpec } from '../shared/nft/transaction.ts';
import { fitComment } from '../shared/nft/transaction.ts';
import type { VirtualServer } from './virtual-servers.ts';

const ENDPOINTS = 'affinity-endpoints';
const ENDPOINT_IPS = 'affinity-endpoint-ips';
const TIMEOUTS = 'affinity-timeouts';
const COUNTS = 'affinity-counts';

/** The nat prerouting/output rule sending a new connection to its affinity chain. */
export function steerRule(syntax: FamilySyntax): string {
  return `${vipKey(syntax)} vmap @${COUNTS}`;
}

/** The service side of a new connection, from conntrack (the packet's header is scratch). */
function serviceKey(syntax: FamilySyntax): string {
  return `ct original ${syntax.ip} daddr . meta l4proto . ct original proto-dst`;
}

export function affinitySets(syntax: FamilySyntax): SetSpec[] {
  const addr = syntax.addrType;
  const vip = `${addr} . inet_proto . inet_service`;
  return [
    affinityClientsSet(syntax),
    {
      name: TIMEOUTS,
      kind: 'map',
      type: `type ${vip} : verdict`,
      comment: 'ClientIP virtual server -> chain remembering its clients',
    },
    {
      name: COUNTS,
      kind: 'map',
      type: `type ${vip} : verdict`,
      comment: 'ClientIP virtual server -> chain steering to a remembered real server',
    },
    {
      name: ENDPOINTS,
      kind: 'map',
      type: `type ${vip} . inet_service : ${addr} . inet_service`,
      comment: 'ClientIP virtual server . index -> real server',
    },
    {
      name: ENDPOINT_IPS,
      kind: 'map',
      type: `type ${vip} . inet_service : ${addr}`,
      comment: 'ClientIP virtual server . index -> real server address',
    },
  ];
}

export function affinityChains(syntax: FamilySyntax): ChainSpec[] {
  const ip = syntax.ip;
  return [
    {
      // `ct original proto-dst` needs a protocol to have a type: a rule per protocol.
      name: 'filter-postrouting',
      comment: 'ClientIP affinity: remember the real server of a new connection',
      base: { type: 'filter', hook: 'postrouting', priority: '90' },
      rules: AFFINITY_PROTOCOLS.map(
        (p) =>
          `ct state new meta l4proto ${p} ct original ${ip} daddr . meta l4proto . ct original proto-dst vmap @${TIMEOUTS}`,
      ),
    },
  ];
}

function steerChain(syntax: FamilySyntax, proto: AffinityProtocol, count: number): ChainSpec {
  const ip = syntax.ip;
  const service = serviceKey(syntax);
  const dnat = dnatByIndex(syntax, proto, service, ENDPOINTS);
  const remembered = rememberedEndpointRules(syntax, proto, count, service, ENDPOINT_IPS, dnat);
  return {
    name: `affinity-${proto}-${count}`,
    comment: `ClientIP: the remembered one of ${count} real servers, else IPVS schedules`,
    rules: [
      'jump firewall-check',
      ...remembered,
      `meta l4proto ${proto} ${ip} daddr set ct original ${ip} daddr ${proto} dport set ct original proto-dst`,
    ],
  };
}

/**
 * The elements and shared chains of `servers`' ClientIP virtual servers (those of a port with
 * session affinity and at least one real server).
 */
export function addAffinity(
  builder: RulesetBuilder,
  syntax: FamilySyntax,
  state: ProxyState,
  servers: Iterable<VirtualServer>,
): void {
  // In the order of the elements' keys (the virtual servers come in virtualServerKey order,
  // `TCP 10.0.0.10:80` before `TCP 10.0.0.1:80`), so that the builder finds each map in order
  // and need not sort it (~30k elements a map at 3,000 services × 10 real servers).
  const sticky: { key: string; vs: VirtualServer; seconds: number }[] = [];
  for (const vs of servers) {
    const seconds = state.servicePorts.get(vs.servicePort)?.sessionAffinity?.timeoutSeconds;
    if (seconds === undefined || vs.realServers.length === 0) continue;
    sticky.push({ key: `${vs.address} . ${vs.protocol.toLowerCase()} . ${vs.port}`, vs, seconds });
  }
  sticky.sort((a, b) => compareText(a.key, b.key));
  // Each chain built once and shared by every virtual server using it: the builder's check that a
  // chain added again is the same is then one comparison, not a JSON round trip per server.
  const records = new Map<number, ChainSpec>();
  const steers = new Map<string, ChainSpec>();
  const indexOrders = new Map<number, readonly number[]>();
  for (const { key, vs, seconds } of sticky) {
    const count = vs.realServers.length;
    const proto = vs.protocol.toLowerCase() as AffinityProtocol;
    const comment = fitComment(vs.servicePort);
    let record = records.get(seconds);
    if (!record) {
      record = affinityRecordChain(syntax, seconds);
      records.set(seconds, record);
      builder.addChain(record);
    }
    builder.addElement(TIMEOUTS, { key, value: `goto ${record.name}`, comment });
    const shape = `${proto} ${count}`;
    let steer = steers.get(shape);
    if (!steer) {
      steer = steerChain(syntax, proto, count);
      steers.set(shape, steer);
      builder.addChain(steer);
    }
    builder.addElement(COUNTS, { key, value: `goto ${steer.name}`, comment });
    let indices = indexOrders.get(count);
    if (!indices) {
      indices = indicesInTextOrder(count);
      indexOrders.set(count, indices);
    }
    for (const i of indices) {
      const rs = vs.realServers[i]!;
      builder.addElement(ENDPOINTS, { key: `${key} . ${i}`, value: `${rs.address} . ${rs.port}` });
      builder.addElement(ENDPOINT_IPS, { key: `${key} . ${i}`, value: rs.address });
    }
  }
}

/** 0 … count - 1 in the order of their text (`10` before `2`), as the maps' keys sort them. */
function indicesInTextOrder(count: number): readonly number[] {
  return Array.from({ length: count }, (_, i) => i).sort((a, b) => compareText(`${a}`, `${b}`));
}
