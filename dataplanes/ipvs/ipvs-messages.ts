// IPVS generic-netlink message bodies (include/uapi/linux/ip_vs.h): the attributes of the service
// and destination commands, and the decoding of GET_SERVICE / GET_DEST dump replies.
import ipaddr from 'ipaddr.js';
import { familyOf } from '../../contract/base/ip-address.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { Protocol } from '../../contract/proxy-state.ts';
import { AttributeWriter, parseAttributes } from '../shared/netlink-attributes.ts';
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
function writeAddress(w: AttributeWriter, type: number, address: string): void {
  const at = w.attribute(type, 16);
  if (writeDottedQuad(w, at, address)) return;
  const bytes = ipaddr.parse(address).toByteArray();
  for (let i = 0; i < bytes.length; i++) w.setU8(at + i, bytes[i]!);
}

/**
 * Writes a dotted-quad IPv4 address (decimal octets, as canonicalIP gives them) at `at`; false,
 * having written nothing, for anything else. Two addresses go into every real-server command
 * (110,000 at 10k services), and ipaddr.js's parse was ~a fifth of a cold sync's CPU.
 */
function writeDottedQuad(w: AttributeWriter, at: number, address: string): boolean {
  const octets = [0, 0, 0, 0];
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < address.length; i++) {
    const code = address.charCodeAt(i);
    if (code === 46 && digits > 0 && dots < 3) {
      octets[dots++] = octet;
      octet = 0;
      digits = 0;
    } else if (code >= 48 && code <= 57 && digits < 3) {
      octet = octet * 10 + code - 48;
      digits++;
    } else return false;
  }
  if (dots !== 3 || digits === 0) return false;
  octets[3] = octet;
  if (octets.some((o) => o > 255)) return false;
  for (let i = 0; i < 4; i++) w.setU8(at + i, octets[i]!);
  return true;
}

function addressText(family: IPFamily, bytes: Buffer): string {
  return ipaddr.fromByteArray([...bytes.subarray(0, family === 'IPv4' ? 4 : 16)]).toString();
}

function writeServiceIdentity(
  w: AttributeWriter,
  service: Pick<VirtualService, 'family' | 'protocol' | 'address' | 'port'>,
): void {
  w.u16(SVC_ATTR.AF, AF[service.family]);
  w.u16(SVC_ATTR.PROTOCOL, PROTO[service.protocol]);
  writeAddress(w, SVC_ATTR.ADDR, service.address);
  w.be16(SVC_ATTR.PORT, service.port);
}

/** NEW_SERVICE / SET_SERVICE body: identity plus every setting (the kernel wants them all). */
export function writeServiceMessage(w: AttributeWriter, service: VirtualService): void {
  const nest = w.begin(CMD_ATTR.SERVICE);
  writeServiceIdentity(w, service);
  w.string(SVC_ATTR.SCHED_NAME, service.scheduler);
  let bits = service.persistenceTimeout > 0 ? IP_VS_SVC_F_PERSISTENT : 0;
  for (const flag of service.schedulerFlags) bits |= SCHED_FLAG_BITS.get(flag)!;
  // struct ip_vs_flags: the flags, then the mask of those to change (all).
  const flags = w.attribute(SVC_ATTR.FLAGS, 8);
  w.setU32(flags, bits);
  w.setU32(flags + 4, 0xffffffff);
  w.u32(SVC_ATTR.TIMEOUT, service.persistenceTimeout);
  // Persistence per client address: all ones for IPv4, a prefix length for IPv6.
  w.u32(SVC_ATTR.NETMASK, service.family === 'IPv4' ? 0xffffffff : 128);
  w.end(nest);
}

/** DEL_SERVICE and GET_DEST body: the service's identity only. */
export function writeServiceIdentityMessage(
  w: AttributeWriter,
  service: Pick<VirtualService, 'family' | 'protocol' | 'address' | 'port'>,
): void {
  const nest = w.begin(CMD_ATTR.SERVICE);
  writeServiceIdentity(w, service);
  w.end(nest);
}

/** NEW_DEST / SET_DEST body. */
export function writeDestMessage(w: AttributeWriter, service: VirtualService, server: RealServer): void {
  writeServiceIdentityMessage(w, service);
  const nest = w.begin(CMD_ATTR.DEST);
  writeAddress(w, DEST_ATTR.ADDR, server.address);
  w.be16(DEST_ATTR.PORT, server.port);
  w.u16(DEST_ATTR.ADDR_FAMILY, AF[familyOf(server.address)]);
  w.u32(DEST_ATTR.FWD_METHOD, FWD_MASQ);
  w.u32(DEST_ATTR.WEIGHT, server.weight);
  w.u32(DEST_ATTR.U_THRESH, 0);
  w.u32(DEST_ATTR.L_THRESH, 0);
  w.end(nest);
}

/** DEL_DEST body. */
export function writeDestIdentityMessage(
  w: AttributeWriter,
  service: VirtualService,
  server: Pick<RealServer, 'address' | 'port'>,
): void {
  writeServiceIdentityMessage(w, service);
  const nest = w.begin(CMD_ATTR.DEST);
  writeAddress(w, DEST_ATTR.ADDR, server.address);
  w.be16(DEST_ATTR.PORT, server.port);
  w.end(nest);
}

/** What `write` writes, as a Buffer of its own (one message's body). */
function written(write: (w: AttributeWriter) => void): Buffer {
  const w = new AttributeWriter();
  write(w);
  return w.bytesWritten();
}

export function serviceMessage(service: VirtualService): Buffer {
  return written((w) => writeServiceMessage(w, service));
}

export function serviceIdentityMessage(
  service: Pick<VirtualService, 'family' | 'protocol' | 'address' | 'port'>,
): Buffer {
  return written((w) => writeServiceIdentityMessage(w, service));
}

export function destMessage(service: VirtualService, server: RealServer): Buffer {
  return written((w) => writeDestMessage(w, service, server));
}

export function destIdentityMessage(
  service: VirtualService,
  server: Pick<RealServer, 'address' | 'port'>,
): Buffer {
  return written((w) => writeDestIdentityMessage(w, service, server));
}

/** Connection timeouts in seconds (ipvsadm --set); 0 leaves the kernel's value as it is. */
export interface IpvsTimeouts {
  readonly tcpSeconds: number;
  readonly tcpFinSeconds: number;
  readonly udpSeconds: number;
}

/** SET_CONFIG body: only the timeouts that are set. */
export function writeTimeoutsMessage(w: AttributeWriter, timeouts: IpvsTimeouts): void {
  if (timeouts.tcpSeconds > 0) w.u32(CMD_ATTR.TIMEOUT_TCP, timeouts.tcpSeconds);
  if (timeouts.tcpFinSeconds > 0) w.u32(CMD_ATTR.TIMEOUT_TCP_FIN, timeouts.tcpFinSeconds);
  if (timeouts.udpSeconds > 0) w.u32(CMD_ATTR.TIMEOUT_UDP, timeouts.udpSeconds);
}

export function timeoutsMessage(timeouts: IpvsTimeouts): Buffer {
  return written((w) => writeTimeoutsMessage(w, timeouts));
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
