// Netlink requests framed several to a datagram (one sendmsg), answers routed back to their
// datagram by sequence number: generic netlink for the IPVS client, nfnetlink batches for the
// nftables element writer. The kernel handles a datagram's messages in order and answers a
// message only when it fails or asks for an acknowledgement (netlink_rcv_skb; an nf_tables batch
// delivers its answers once the whole batch is committed or aborted): so only one message asks,
// the last one the kernel answers, and its acknowledgement, queued after every earlier answer,
// settles the whole datagram. Per message this costs no syscall, promise, timer or closure: what
// the `netlink` package's request() spends per message was most of a cold sync's CPU
// (docs/benchmarks-log.md, the IPVS section).
import { getSystemErrorName } from 'node:util';
// The package's raw layer and constants, not its index: the index loads every family it ships
// (rtnetlink, nl80211, WireGuard: ~1.4 MB of generated code; in a process of its own ~1 MiB more
// live heap, 3 MiB more committed, 4 MiB more of Node's file pages touched).
import { Protocol } from 'netlink/dist/constants.js';
import { RawNetlinkSocket } from 'netlink/dist/raw.js';
import { AttributeWriter } from './netlink-attributes.ts';

const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
export const NLM_F_DUMP = 0x300;
/**
 * struct nlmsghdr (16 bytes), then a 4-byte family header: genlmsghdr (cmd, version, reserved)
 * or nfgenmsg (nfproto family, version, resource id in network order).
 */
const NLMSG_HEADER = 16;
const FAMILY_HEADER = NLMSG_HEADER + 4;

/** The raw socket's part the client uses: the netlink package's RawNetlinkSocket (tests script it). */
export interface DatagramSocket {
  send(datagram: Buffer, options: undefined, callback: (error?: Error) => void): void;
  on(event: 'message', listener: (datagram: Buffer) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  ref(): void;
  unref(): void;
  close(): void;
}

export function openGenericNetlink(): DatagramSocket {
  return new RawNetlinkSocket(Protocol.GENERIC) as unknown as DatagramSocket;
}

/**
 * Room for a datagram of 32 IPVS real-server commands (~140 bytes each) without growing the
 * buffer, a copy per datagram otherwise.
 */
const DATAGRAM_BYTES = 8192;

export function openNetfilterNetlink(
  sendBufferSize: number,
): DatagramSocket & { getSendBufferSize(): number } {
  // SO_SNDBUF (the kernel caps it at net.core.wmem_max, then doubles it): a datagram larger than
  // it is refused (EMSGSIZE), and an nf_tables batch is atomic only within one datagram.
  return new RawNetlinkSocket(Protocol.NETFILTER, {
    sendBufferSize,
    recvBufferSize: sendBufferSize,
  }) as unknown as DatagramSocket & { getSendBufferSize(): number };
}

/**
 * The messages of one datagram, written in place: each header, then its attributes. The header
 * after nlmsghdr is genlmsghdr (`first` = cmd, `second` = version) or nfgenmsg (`first` = nfproto
 * family, `second` = version, `resId`).
 */
export class NetlinkDatagram {
  readonly attributes: AttributeWriter;
  readonly #starts: number[] = [];
  readonly #flags: number[] = [];
  /** The message that asks for an acknowledgement: the last one the kernel answers. */
  #acked: number | undefined;
  /** An nfnetlink batch: an error answering its first message (the batch) ends it. */
  #batch = false;

  /** `bytes`: the buffer to start with (it grows, copying, past them). */
  constructor(bytes = DATAGRAM_BYTES) {
    this.attributes = new AttributeWriter(bytes);
  }

  get count(): number {
    return this.#starts.length;
  }

  /** Where the kernel's answers end: the acknowledged message, else the last. */
  get acked(): number {
    return this.#acked ?? this.#starts.length - 1;
  }

  get batch(): boolean {
    return this.#batch;
  }

  /** Starts the next message; its attributes follow through `attributes`. */
  message(type: number, first: number, second: number, flags = 0, resId = 0): void {
    this.#close();
    const w = this.attributes;
    const at = w.skip(FAMILY_HEADER);
    w.setU16(at + 4, type);
    this.#flags.push(flags | NLM_F_REQUEST);
    w.setU8(at + NLMSG_HEADER, first);
    w.setU8(at + NLMSG_HEADER + 1, second);
    w.setU16(at + NLMSG_HEADER + 2, ((resId & 0xff) << 8) | (resId >>> 8));
    this.#starts.push(at);
  }

  /**
   * The message just started asks for the acknowledgement (instead of the last one: an nfnetlink
   * batch's end message is never answered), and the datagram is a batch.
   */
  ackBatchHere(): void {
    this.#acked = this.#starts.length - 1;
    this.#batch = true;
  }

  /**
   * The datagram, its messages numbered from `firstSeq`, one asking for an acknowledgement. Not a
   * copy: the datagram is written once and framed once.
   */
  frame(firstSeq: number): Buffer {
    this.#close();
    const w = this.attributes;
    const acked = this.acked;
    for (const [i, at] of this.#starts.entries()) {
      w.setU32(at + 8, (firstSeq + i) >>> 0);
      w.setU16(at + 6, this.#flags[i]! | (i === acked ? NLM_F_ACK : 0));
    }
    return w.view();
  }

  /** The length of the message being written, now that its attributes are all there. */
  #close(): void {
    const at = this.#starts.at(-1);
    if (at !== undefined) this.attributes.setU32(at, this.attributes.length - at);
  }
}

/** What the kernel answered a datagram. */
export interface NetlinkAnswers {
  /** The errno of each message it refused, by the message's index in the datagram. */
  readonly refused: Map<number, number>;
  /** The replies' payloads after their family header (a dump's, a family lookup's). */
  readonly replies: Buffer[];
}

/** No answer came within the bound: it may still come, out of step (the socket should go). */
export class NoAnswer extends Error {}

interface InFlight {
  readonly firstSeq: number;
  readonly count: number;
  readonly acked: number;
  readonly batch: boolean;
  readonly answers: NetlinkAnswers;
  readonly done: PromiseWithResolvers<NetlinkAnswers>;
  readonly timer: NodeJS.Timeout;
}

export class NetlinkSocket {
  readonly #socket: DatagramSocket;
  readonly #timeoutMs: number;
  #seq = 1;
  /** The datagrams sent and not yet answered, in the order sent (a few at most). */
  readonly #inFlight: InFlight[] = [];

  constructor(socket: DatagramSocket, timeoutMs: number) {
    this.#socket = socket;
    this.#timeoutMs = timeoutMs;
    socket.on('message', (datagram) => this.#receive(datagram));
    // ENOBUFS: an answer did not fit the receive buffer; which one is unknown.
    socket.on('error', (error) => {
      for (const sent of this.#inFlight.splice(0)) this.#settle(sent, error);
    });
    // Referenced only while a datagram is unanswered, so an idle client keeps no process alive.
    socket.unref();
  }

  /** Sends the datagram; its answers once the kernel answered its last message. */
  send(datagram: NetlinkDatagram): Promise<NetlinkAnswers> {
    const firstSeq = this.#seq;
    const count = datagram.count;
    // Sequence numbers are 32 bits and wrap (answers are matched modulo 2^32).
    this.#seq = (this.#seq + count) >>> 0;
    const bytes = datagram.frame(firstSeq);
    const done = Promise.withResolvers<NetlinkAnswers>();
    const timer = setTimeout(() => {
      const at = this.#inFlight.indexOf(sent);
      if (at >= 0) this.#inFlight.splice(at, 1);
      this.#settle(sent, new NoAnswer(`no answer from the kernel within ${this.#timeoutMs} ms`));
    }, this.#timeoutMs);
    const { acked, batch } = datagram;
    const sent: InFlight = {
      firstSeq,
      count,
      acked,
      batch,
      answers: { refused: new Map(), replies: [] },
      done,
      timer,
    };
    if (this.#inFlight.push(sent) === 1) this.#socket.ref();
    this.#socket.send(bytes, undefined, (error) => {
      if (error === undefined) return;
      const at = this.#inFlight.indexOf(sent);
      if (at >= 0) this.#inFlight.splice(at, 1);
      this.#settle(sent, error);
    });
    return done.promise;
  }

  close(): void {
    this.#socket.close();
  }

  #settle(sent: InFlight, error?: Error): void {
    clearTimeout(sent.timer);
    if (this.#inFlight.length === 0) this.#socket.unref();
    if (error === undefined) sent.done.resolve(sent.answers);
    else sent.done.reject(error);
  }

  #receive(datagram: Buffer): void {
    for (let at = 0; at + NLMSG_HEADER <= datagram.length; ) {
      const length = datagram.readUInt32LE(at);
      if (length < NLMSG_HEADER || at + length > datagram.length) return;
      this.#answer(datagram, at, length);
      at += (length + 3) & ~3;
    }
  }

  #answer(datagram: Buffer, at: number, length: number): void {
    const type = datagram.readUInt16LE(at + 4);
    const seq = datagram.readUInt32LE(at + 8);
    const which = this.#inFlight.findIndex((s) => (seq - s.firstSeq) >>> 0 < s.count);
    // An answer to a datagram given up on (timed out): nothing waits for it.
    if (which < 0) return;
    const sent = this.#inFlight[which]!;
    const index = (seq - sent.firstSeq) >>> 0;
    if (type !== NLMSG_ERROR && type !== NLMSG_DONE) {
      sent.answers.replies.push(datagram.subarray(at + FAMILY_HEADER, at + length));
      return;
    }
    // struct nlmsgerr / a dump's closing int: a negative errno, 0 for an acknowledgement.
    const errno = length >= NLMSG_HEADER + 4 ? -datagram.readInt32LE(at + NLMSG_HEADER) : 0;
    if (errno !== 0) sent.answers.refused.set(index, errno);
    // A batch refused as a whole (its commit failed, or no room for its errors) answers its
    // first message, and maybe nothing else.
    if (index === sent.acked || (sent.batch && index === 0 && errno !== 0)) {
      this.#inFlight.splice(which, 1);
      this.#settle(sent);
    }
  }
}

/** "EEXIST" for 17, as the kernel's refusals read in messages. */
export function errnoName(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return String(errno);
  }
}
