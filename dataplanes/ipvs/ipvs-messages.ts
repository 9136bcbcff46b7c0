// IPVS generic-netlink message bodies (include/uapi/linux/ip_vs.h): the attributes of the service
// and destination commands, and the decoding of GET_SERVICE / GET_DEST dump replies.
import ipaddr from 'ipaddr.js';
import { familyOf } from '../../src/base/ip-address.ts';
import type { IPFamily } from '../../src/base/ip-family.ts';
import type { Protocol } from '../../src/model/proxy-state.ts';
import { attribute, be16, nested, parseAttributes, string, u16, u32 } from '../shared/netlink-attributes.ts';
import type { RealServer, SchedulerFlag, VirtualService } from './virtual-servers.ts';

export const IPVS_GENL_NAME = 'IPVS';
export const IPVS_GENL_VERSION = 1;

export const IPVS_CMD = {
  NEW_SERVICE: 1,
  SET_SERVICE: 2,
  DEL_SERVICE: 3,
  GET_SERVICE: 4,
  NEW_DEST: 5,
  SET_DEST: 6,
  DEL_DEST: 7,
  GET_DEST: 8,
  SET_CONFIG: 12,
} as const;

const CMD_ATTR = { SERVICE: 1, DEST: 2, TIMEOUT_TCP: 4, TIMEOUT_TCP_FIN: 5, TIMEOUT_UDP: 6 } as const;

const SVC_ATTR = {
  AF: 1,
  PROTOCOL: 2,
  ADDR: 3,
  PORT: 4,
  FWMARK: 5,
  SCHED_NAME: 6,
  FLAGS: 7,
  TIMEOUT: 8,
  NETMASK: 9,
} as const;

const DEST_ATTR = {
  ADDR: 1,
  PORT: 2,
  FWD_METHOD: 3,
  WEIGHT: 4,
  U_THRESH: 5,
  L_THRESH: 6,
  ACTIVE_CONNS: 7,
  INACT_CONNS: 8,
  ADDR_FAMILY: 11,
} as const;

const AF = { IPv4: 2, IPv6: 10 } as const;
const PROTO = { TCP: 6, UDP: 17, SCTP: 132 } as const;
const IP_VS_SVC_F_PERSISTENT = 0x1;
/** IP_VS_SVC_F_SCHED1 and SCHED2, which ip_vs_mh reads as IP_VS_SVC_F_SCHED_MH_FALLBACK and _PORT. */
const SCHED_FLAG_BITS: ReadonlyMap<SchedulerFlag, number> = new Map([
  ['mh-fallback', 0x8],
  ['mh-port', 0x10],
]);
/** IP_VS_CONN_F_MASQ: NAT forwarding, the only method kube-proxy uses. */
const FWD_MASQ = 0;

/** union nf_inet_addr: 16 bytes, an IPv4 address in the first 4. */
function addressBytes(address: string): Buffer {
  const out = Buffer.alloc(16);
  Buffer.from(ipaddr.parse(address).toByteArray()).copy(out);
  return out;
}

function addressText(family: IPFamily, bytes: Buffer): string {
  return ipaddr.fromByteArray([...bytes.subarray(0, family === 'IPv4' ? 4 : 16)]).toString();
}

function serviceIdentity(
  service: Pick<VirtualService, 'family' | 'protocol' | 'address' | 'port'>,
): Buffer[] {
  return [
    u16(SVC_ATTR.AF, AF[service.family]),
    u16(SVC_ATTR.PROTOCOL, PROTO[service.protocol]),
    attribute(SVC_ATTR.ADDR, addressBytes(service.address)),
    be16(SVC_ATTR.PORT, service.port),
  ];
}

/** NEW_SERVICE / SET_SERVICE body: identity plus every setting (the kernel wants them all). */
export function serviceMessage(service: VirtualService): Buffer {
  const flags = Buffer.alloc(8);
  let bits = service.persistenceTimeout > 0 ? IP_VS_SVC_F_PERSISTENT : 0;
  for (const flag of service.schedulerFlags) bits |= SCHED_FLAG_BITS.get(flag)!;
  // struct ip_vs_flags: the flags, then the mask of those to change (all).
  flags.writeUInt32LE(bits, 0);
  flags.writeUInt32LE(0xffffffff, 4);
  return nested(CMD_ATTR.SERVICE, [
    ...serviceIdentity(service),
    string(SVC_ATTR.SCHED_NAME, service.scheduler),
    attribute(SVC_ATTR.FLAGS, flags),
    u32(SVC_ATTR.TIMEOUT, service.persistenceTimeout),
    // Persistence per client address: all ones for IPv4, a prefix length for IPv6.
    u32(SVC_ATTR.NETMASK, service.family === 'IPv4' ? 0xffffffff : 128),
  ]);
}

/** DEL_SERVICE and GET_DEST body: the service's identity only. */
export function serviceIdentityMessage(
  service: Pick<VirtualService, 'family' | 'protocol' | 'address' | 'port'>,
): Buffer {
  return nested(CMD_ATTR.SERVICE, serviceIdentity(service));
}

/** NEW_DEST / SET_DEST body. */
export function destMessage(service: VirtualService, server: RealServer): Buffer {
  return Buffer.concat([
    serviceIdentityMessage(service),
    nested(CMD_ATTR.DEST, [
      attribute(DEST_ATTR.ADDR, addressBytes(server.address)),
      be16(DEST_ATTR.PORT, server.port),
      u16(DEST_ATTR.ADDR_FAMILY, AF[familyOf(server.address)]),
      u32(DEST_ATTR.FWD_METHOD, FWD_MASQ),
      u32(DEST_ATTR.WEIGHT, server.weight),
      u32(DEST_ATTR.U_THRESH, 0),
      u32(DEST_ATTR.L_THRESH, 0),
    ]),
  ]);
}

/** Connection timeouts in seconds (ipvsadm --set); 0 leaves the kernel's value as it is. */
export interface IpvsTimeouts {
  readonly tcpSeconds: number;
  readonly tcpFinSeconds: number;
  readonly udpSeconds: number;
}

/** SET_CONFIG body: only the timeouts that are set. */
export function timeoutsMessage(timeouts: IpvsTimeouts): Buffer {
  const attrs: Buffer[] = [];
  if (timeouts.tcpSeconds > 0) attrs.push(u32(CMD_ATTR.TIMEOUT_TCP, timeouts.tcpSeconds));
  if (timeouts.tcpFinSeconds > 0) attrs.push(u32(CMD_ATTR.TIMEOUT_TCP_FIN, timeouts.tcpFinSeconds));
  if (timeouts.udpSeconds > 0) attrs.push(u32(CMD_ATTR.TIMEOUT_UDP, timeouts.udpSeconds));
  return Buffer.concat(attrs);
}

/** DEL_DEST body. */
export function destIdentityMessage(
  service: VirtualService,
  server: Pick<RealServer, 'address' | 'port'>,
): Buffer {
  return Buffer.concat([
    serviceIdentityMessage(service),
    nested(CMD_ATTR.DEST, [
      attribute(DEST_ATTR.ADDR, addressBytes(server.address)),
      be16(DEST_ATTR.PORT, server.port),
    ]),
  ]);
}

function required(attrs: Map<number, Buffer>, type: number, what: string): Buffer {
  const value = attrs.get(type);
  if (value === undefined) throw new Error(`IPVS reply without ${what}`);
  return value;
}

const FAMILY_OF_AF = new Map<number, IPFamily>([
  [AF.IPv4, 'IPv4'],
  [AF.IPv6, 'IPv6'],
]);
const PROTOCOL_OF = new Map<number, Protocol>([
  [PROTO.TCP, 'TCP'],
  [PROTO.UDP, 'UDP'],
  [PROTO.SCTP, 'SCTP'],
]);

/**
 * A GET_SERVICE dump reply; undefined for services kproxy never makes (firewall-mark services,
 * other protocols or families).
 */
export function decodeService(body: Buffer): VirtualService | undefined {
  const attrs = parseAttributes(required(parseAttributes(body), CMD_ATTR.SERVICE, 'service'));
  const family = FAMILY_OF_AF.get(required(attrs, SVC_ATTR.AF, 'address family').readUInt16LE());
  const protocol = PROTOCOL_OF.get(attrs.get(SVC_ATTR.PROTOCOL)?.readUInt16LE() ?? 0);
  if (
    family === undefined ||
    protocol === undefined ||
    (attrs.get(SVC_ATTR.FWMARK)?.readUInt32LE() ?? 0) !== 0
  ) {
    return undefined;
  }
  const flags = attrs.get(SVC_ATTR.FLAGS)?.readUInt32LE() ?? 0;
  const scheduler = required(attrs, SVC_ATTR.SCHED_NAME, 'scheduler').toString('utf8').replace(/\0.*$/s, '');
  // The same bits mean sh-fallback and sh-port to sh: only mh's are kproxy's to read.
  const schedulerFlags =
    scheduler === 'mh' ? [...SCHED_FLAG_BITS].filter(([, bit]) => flags & bit).map(([flag]) => flag) : [];
  return {
    family,
    protocol,
    address: addressText(family, required(attrs, SVC_ATTR.ADDR, 'address')),
    port: required(attrs, SVC_ATTR.PORT, 'port').readUInt16BE(),
    scheduler,
    schedulerFlags,
    persistenceTimeout:
      flags & IP_VS_SVC_F_PERSISTENT ? (attrs.get(SVC_ATTR.TIMEOUT)?.readUInt32LE() ?? 0) : 0,
  };
}

export interface DumpedRealServer extends RealServer {
  readonly activeConnections: number;
  readonly inactiveConnections: number;
}

/** A GET_DEST dump reply of a service of `family`. */
export function decodeDest(family: IPFamily, body: Buffer): DumpedRealServer {
  const attrs = parseAttributes(required(parseAttributes(body), CMD_ATTR.DEST, 'destination'));
  const af = attrs.get(DEST_ATTR.ADDR_FAMILY)?.readUInt16LE();
  return {
    address: addressText(
      (af !== undefined && FAMILY_OF_AF.get(af)) || family,
      required(attrs, DEST_ATTR.ADDR, 'address'),
    ),
    port: required(attrs, DEST_ATTR.PORT, 'port').readUInt16BE(),
    weight: required(attrs, DEST_ATTR.WEIGHT, 'weight').readUInt32LE(),
    activeConnections: attrs.get(DEST_ATTR.ACTIVE_CONNS)?.readUInt32LE() ?? 0,
    inactiveConnections: attrs.get(DEST_ATTR.INACT_CONNS)?.readUInt32LE() ?? 0,
  };
}
