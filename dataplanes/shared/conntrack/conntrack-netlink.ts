// Conntrack entries deleted by exact original tuple over ctnetlink (linux/netfilter/
// nfnetlink_conntrack.h), for the connections IPVS balanced when kube-proxy's virtual services went
// (ipvs-drain.ts). `conntrack -D` deletes through a filtered dump of the whole table, even for an
// exact tuple: one per connection made it O(cut × table). Here the kernel looks each entry up by
// its tuple (a hash lookup), many requests to a datagram: linear in the number cut.
//
// An entry goes only while its reply comes from the expected source (the IPVS real server) and its
// destination was not NATed: a connection kproxy's DNAT made since, with the same original tuple,
// stays, even when the DNAT chose the same endpoint (IPVS rewrites an entry's reply tuple and never
// sets IPS_DST_NAT; a DNAT does). So each entry is read first (GET: the reply carries its reply
// tuple, status and id), then deleted by tuple and id (DELETE with CTA_ID deletes only the entry of
// that id): one that ended and was made anew in between is not it.
//
// The IPVS drain reads entries the same way (readEntries): each poll looks up the connections IPVS
// lists as live, one GET per connection batched into datagrams, a hash lookup each, rather than a
// dump of the whole table.
import ipaddr from 'ipaddr.js';
import { canonicalIP } from '../../../contract/base/ip-address.ts';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import { parseAttributes } from '../netlink-attributes.ts';
import {
  errnoName,
  type NetlinkAnswers,
  NetlinkDatagram,
  NetlinkSocket,
  openNetfilterNetlink,
} from '../netlink-socket.ts';

/** NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_GET / IPCTNL_MSG_CT_DELETE. */
export const CT_GET = (1 << 8) | 1;
export const CT_DELETE = (1 << 8) | 2;
const AF_INET = 2;
const AF_INET6 = 10;
const NLA_F_NESTED = 0x8000;
/** enum ctattr_type, ctattr_tuple, ctattr_ip, ctattr_l4proto. */
const CTA_TUPLE_ORIG = 1;
const CTA_TUPLE_REPLY = 2;
const CTA_STATUS = 3;
const CTA_PROTOINFO = 4;
const CTA_ID = 12;
/** enum ctattr_protoinfo, ctattr_protoinfo_tcp. */
const CTA_PROTOINFO_TCP = 1;
const CTA_PROTOINFO_TCP_STATE = 1;
/** enum ip_conntrack_status: the destination was NATed (a DNAT rule's binding). */
export const IPS_DST_NAT = 1 << 5;
const CTA_TUPLE_IP = 1;
const CTA_TUPLE_PROTO = 2;
const CTA_IP_V4_SRC = 1;
const CTA_IP_V4_DST = 2;
const CTA_IP_V6_SRC = 3;
const CTA_IP_V6_DST = 4;
const CTA_PROTO_NUM = 1;
const CTA_PROTO_SRC_PORT = 2;
const CTA_PROTO_DST_PORT = 3;
const ENOENT = 2;

export interface ConntrackEndpoint {
  readonly address: string;
  readonly port: number;
}

/** One direction of an entry: IP protocol number (6 TCP, 17 UDP, 132 SCTP), source, destination. */
export interface ConntrackTuple {
  readonly protocol: number;
  readonly source: ConntrackEndpoint;
  readonly destination: ConntrackEndpoint;
}

/**
 * An entry to delete: its original tuple, and the source its replies must come from; one whose
 * destination was NATed is never deleted (it is a DNAT's, not IPVS's).
 */
export interface ExactEntry extends ConntrackTuple {
  readonly replySource: ConntrackEndpoint;
}

/** An entry as a GET answers it. */
export interface DecodedEntry {
  readonly original: ConntrackTuple;
  readonly reply: ConntrackTuple;
  /** CTA_STATUS: enum ip_conntrack_status bits. */
  readonly status: number;
  /** CTA_ID: which entry of that tuple it is (a new one of the same tuple has another). */
  readonly id: number;
  /** A TCP entry's state (enum tcp_conntrack: 1 SYN_SENT, 3 ESTABLISHED, 7 TIME_WAIT, 8 CLOSE, ...). */
  readonly tcpState?: number;
}

/** Deletes conntrack entries in some network namespace (the one its socket was opened in). */
export interface ConntrackDeleter {
  /** Deletes each entry whose reply source is its `replySource`; how many the kernel deleted. */
  deleteEntries(entries: readonly ExactEntry[]): Promise<number>;
  /**
   * The entries of these original tuples, in their order (undefined where there is none), for the
   * IPVS drain's check of the connections IPVS lists as live (ipvs-drain.ts); without it the drain
   * goes by IPVS's list alone.
   */
  readEntries?(tuples: readonly ConntrackTuple[]): Promise<(DecodedEntry | undefined)[]>;
}

/** The kernel refused a request about an entry, or did not answer. */
export class ConntrackNetlinkError extends DataplaneError {
  constructor(message: string) {
    super(message);
    this.name = 'ConntrackNetlinkError';
  }
}

/** "tcp 10.100.0.200:40000 -> 10.20.30.41:80 (replies from 10.244.1.10:80)". */
function describeEntry(entry: ConntrackTuple | ExactEntry): string {
  const name = PROTOCOL_NAMES.get(entry.protocol) ?? `protocol ${entry.protocol}`;
  const from = 'replySource' in entry ? ` (replies from ${hostPort(entry.replySource)})` : '';
  return `${name} ${hostPort(entry.source)} -> ${hostPort(entry.destination)}${from}`;
}

const PROTOCOL_NAMES = new Map([
  [6, 'tcp'],
  [17, 'udp'],
  [132, 'sctp'],
]);

function hostPort({ address, port }: ConntrackEndpoint): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/**
 * Appends a GET or DELETE of the entry whose original tuple is `tuple` (nfgenmsg: its family,
 * version 0); a DELETE with `id` deletes only the entry of that id. Never a DELETE without a tuple:
 * that flushes the table.
 */
export function writeEntryRequest(
  datagram: NetlinkDatagram,
  type: number,
  tuple: ConntrackTuple,
  id?: number,
): void {
  const source = ipaddr.parse(tuple.source.address).toByteArray();
  const destination = ipaddr.parse(tuple.destination.address).toByteArray();
  if (source.length !== destination.length) throw new Error(`mixed families in ${JSON.stringify(tuple)}`);
  const v4 = source.length === 4;
  datagram.message(type, v4 ? AF_INET : AF_INET6, 0);
  const w = datagram.attributes;
  const orig = w.begin(CTA_TUPLE_ORIG | NLA_F_NESTED);
  const ip = w.begin(CTA_TUPLE_IP | NLA_F_NESTED);
  w.bytes(v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, Uint8Array.from(source));
  w.bytes(v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST, Uint8Array.from(destination));
  w.end(ip);
  const proto = w.begin(CTA_TUPLE_PROTO | NLA_F_NESTED);
  w.setU8(w.attribute(CTA_PROTO_NUM, 1), tuple.protocol);
  w.be16(CTA_PROTO_SRC_PORT, tuple.source.port);
  w.be16(CTA_PROTO_DST_PORT, tuple.destination.port);
  w.end(proto);
  w.end(orig);
  if (id !== undefined) w.setU32BE(w.attribute(CTA_ID, 4), id);
}

function required(attributes: Map<number, Buffer>, type: number, what: string): Buffer {
  const value = attributes.get(type);
  if (value === undefined) throw new Error(`conntrack entry without ${what}`);
  return value;
}

function decodeTuple(nested: Buffer): ConntrackTuple {
  const attributes = parseAttributes(nested);
  const ip = parseAttributes(required(attributes, CTA_TUPLE_IP, 'addresses'));
  const proto = parseAttributes(required(attributes, CTA_TUPLE_PROTO, 'protocol'));
  const v4 = ip.has(CTA_IP_V4_SRC);
  const address = (type: number) => ipaddr.fromByteArray([...required(ip, type, 'an address')]).toString();
  const port = (type: number) => required(proto, type, 'a port').readUInt16BE();
  return {
    protocol: required(proto, CTA_PROTO_NUM, 'a protocol number').readUInt8(),
    source: {
      address: address(v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC),
      port: port(CTA_PROTO_SRC_PORT),
    },
    destination: {
      address: address(v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST),
      port: port(CTA_PROTO_DST_PORT),
    },
  };
}

/** A TCP entry's CTA_PROTOINFO_TCP_STATE; undefined for other protocols. */
function tcpStateOf(attributes: Map<number, Buffer>): number | undefined {
  const protoinfo = attributes.get(CTA_PROTOINFO);
  const tcp = protoinfo && parseAttributes(protoinfo).get(CTA_PROTOINFO_TCP);
  return tcp && parseAttributes(tcp).get(CTA_PROTOINFO_TCP_STATE)?.readUInt8();
}

/** A GET's reply, its payload after nfgenmsg (NetlinkAnswers.replies). */
export function decodeEntry(body: Buffer): DecodedEntry {
  const attributes = parseAttributes(body);
  const tcpState = tcpStateOf(attributes);
  return {
    original: decodeTuple(required(attributes, CTA_TUPLE_ORIG, 'an original tuple')),
    reply: decodeTuple(required(attributes, CTA_TUPLE_REPLY, 'a reply tuple')),
    status: required(attributes, CTA_STATUS, 'a status').readUInt32BE(),
    id: required(attributes, CTA_ID, 'an id').readUInt32BE(),
    ...(tcpState !== undefined && { tcpState }),
  };
}

function tupleKey({ protocol, source, destination }: ConntrackTuple): string {
  return `${protocol} ${source.address} ${source.port} ${destination.address} ${destination.port}`;
}

function canonical(endpoint: ConntrackEndpoint): ConntrackEndpoint {
  return { address: canonicalIP(endpoint.address) ?? endpoint.address, port: endpoint.port };
}

/**
 * Requests per datagram. The kernel handles a datagram's requests within the one sendmsg, queueing
 * each GET's reply (~1 KiB of receive buffer each once trimmed) before anything reads them; a reply
 * that does not fit is lost (ENOBUFS, the whole datagram fails). 128 take ~130 KiB of the socket's
 * buffer, 416 KiB where net.core.rmem_max is Linux's default.
 */
const ENTRIES_PER_DATAGRAM = 128;
/** Asked for the socket's receive buffer (the kernel gives at most twice net.core.rmem_max). */
const SOCKET_BUFFER = 1 << 20;
/**
 * How long a datagram may go unanswered. The kernel answers it within the sendmsg, a hash lookup
 * per request; no answer means a lost reply or a stuck kernel. As for IPVS (ipvs-client.ts), 10 s is
 * far above any real answer on a loaded node.
 */
const REQUEST_TIMEOUT_MS = 10_000;

async function answered(
  socket: NetlinkSocket,
  datagram: NetlinkDatagram,
  what: string,
  entries: readonly (ConntrackTuple | ExactEntry)[],
): Promise<NetlinkAnswers> {
  try {
    return await socket.send(datagram);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const which =
      entries.length === 1
        ? describeEntry(entries[0]!)
        : `${entries.length} entries from ${describeEntry(entries[0]!)} on`;
    throw new ConntrackNetlinkError(`conntrack ${what} of ${which}: ${message}`);
  }
}

/** The requests of `entries` ENOENT answered (the entry is gone); any other refusal is thrown. */
function missing(
  refused: ReadonlyMap<number, number>,
  what: string,
  entries: readonly (ConntrackTuple | ExactEntry)[],
): number {
  for (const [index, errno] of refused) {
    if (errno !== ENOENT)
      throw new ConntrackNetlinkError(
        `conntrack ${what} of ${describeEntry(entries[index]!)} refused: ${errnoName(errno)}`,
      );
  }
  return refused.size;
}

/** `tuples` (canonical) in datagrams: the first of one request, the rest of ENTRIES_PER_DATAGRAM. */
function* chunks<T>(tuples: readonly T[]): Generator<T[]> {
  // A socket without CAP_NET_ADMIN gets one refusal per datagram, for its first message
  // (nfnetlink_rcv), and a datagram of more would wait for the rest.
  for (let start = 0, size = 1; start < tuples.length; start += size, size = ENTRIES_PER_DATAGRAM)
    yield tuples.slice(start, start + size);
}

/** The entries of `chunk`'s original tuples, by tupleKey: one GET each, in one datagram. */
async function getEntries(
  socket: NetlinkSocket,
  chunk: readonly (ConntrackTuple | ExactEntry)[],
): Promise<Map<string, DecodedEntry>> {
  const get = new NetlinkDatagram();
  for (const tuple of chunk) writeEntryRequest(get, CT_GET, tuple);
  const read = await answered(socket, get, 'get', chunk);
  missing(read.refused, 'get', chunk);
  // A reply does not say which request it answers: its original tuple does.
  return new Map(read.replies.map(decodeEntry).map((entry) => [tupleKey(entry.original), entry]));
}

function canonicalTuple<T extends ConntrackTuple>(tuple: T): T {
  return { ...tuple, source: canonical(tuple.source), destination: canonical(tuple.destination) };
}

/** The entries of `tuples` through `socket` (its namespace's table), in their order. */
async function readExactEntries(
  socket: NetlinkSocket,
  tuples: readonly ConntrackTuple[],
): Promise<(DecodedEntry | undefined)[]> {
  const read: (DecodedEntry | undefined)[] = [];
  for (const chunk of chunks(tuples.map(canonicalTuple))) {
    const found = await getEntries(socket, chunk);
    for (const tuple of chunk) read.push(found.get(tupleKey(tuple)));
  }
  return read;
}

/** Deletes `entries` through `socket` (its namespace's table); how many the kernel deleted. */
async function deleteExactEntries(socket: NetlinkSocket, entries: readonly ExactEntry[]): Promise<number> {
  let deleted = 0;
  const exact = entries.map((entry) => ({
    ...canonicalTuple(entry),
    replySource: canonical(entry.replySource),
  }));
  for (const chunk of chunks(exact)) {
    const found = await getEntries(socket, chunk);
    const remove = new NetlinkDatagram();
    const removing: ExactEntry[] = [];
    for (const entry of chunk) {
      const current = found.get(tupleKey(entry));
      const from = current?.reply.source;
      if (from?.address !== entry.replySource.address || from.port !== entry.replySource.port) continue;
      // The same client port and endpoint, taken since by a DNAT: IPVS's reply hook matches such a
      // connection's replies to the IPVS connection of that client and real server, so IPVS lists
      // it as going on, but the entry is the DNAT's and its connection must keep it.
      if ((current!.status & IPS_DST_NAT) !== 0) continue;
      writeEntryRequest(remove, CT_DELETE, entry, current!.id);
      removing.push(entry);
    }
    if (removing.length === 0) continue;
    const removed = await answered(socket, remove, 'delete', removing);
    deleted += removing.length - missing(removed.refused, 'delete', removing);
  }
  return deleted;
}

/** `use` on a ctnetlink socket opened in this process's network namespace, closed after. */
async function withSocket<T>(use: (socket: NetlinkSocket) => Promise<T>): Promise<T> {
  let socket: NetlinkSocket;
  try {
    socket = new NetlinkSocket(openNetfilterNetlink(SOCKET_BUFFER), REQUEST_TIMEOUT_MS);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConntrackNetlinkError(
      `conntrack: no netfilter netlink socket (nfnetlink not loaded?): ${message}`,
    );
  }
  try {
    return await use(socket);
  } finally {
    socket.close();
  }
}

/** A deleter (and reader) on a ctnetlink socket opened, per call, in this process's network namespace. */
export const netlinkConntrackDeleter: Required<ConntrackDeleter> = {
  async deleteEntries(entries) {
    return entries.length === 0 ? 0 : withSocket((socket) => deleteExactEntries(socket, entries));
  },
  async readEntries(tuples) {
    return tuples.length === 0 ? [] : withSocket((socket) => readExactEntries(socket, tuples));
  },
};
