// A generic-netlink socket scripted like the kernel, for the IPVS client's unit tests (the real
// socket runs in the VM tests): it reads each datagram's messages as netlink_rcv_skb does, in
// order, and answers the family lookup (IPVS is family 42), dumps (empty) and commands: a refusal
// for each command `refuse` picks, an acknowledgement where the message asks for one, each answer
// a datagram of its own. All the answers of what was sent go out together on the next event-loop
// turn, in the order sent, unless the socket is `silent`.

import { attribute, parseAttributes, u16 } from '../../../dataplanes/shared/netlink-attributes.ts';
import type { DatagramSocket } from '../../../dataplanes/shared/netlink-socket.ts';

export const IPVS_FAMILY = 42;
const GENL_ID_CTRL = 0x10;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_ACK = 0x4;
const NLM_F_DUMP = 0x300;

/** One message as the kernel read it. */
export interface SentMessage {
  readonly type: number;
  readonly flags: number;
  readonly seq: number;
  readonly cmd: number;
  readonly body: Buffer;
}

function header(type: number, flags: number, seq: number, payload: Buffer): Buffer {
  const out = Buffer.alloc(16);
  out.writeUInt32LE(16 + payload.length, 0);
  out.writeUInt16LE(type, 4);
  out.writeUInt16LE(flags, 6);
  out.writeUInt32LE(seq, 8);
  return Buffer.concat([out, payload]);
}

/** NLMSG_ERROR: errno (0 acknowledges), then the request's header. */
function errorAnswer(message: SentMessage, errno: number): Buffer {
  const payload = Buffer.alloc(4 + 16);
  payload.writeInt32LE(-errno, 0);
  payload.writeUInt16LE(message.type, 8);
  payload.writeUInt32LE(message.seq, 12);
  return header(NLMSG_ERROR, 0, message.seq, payload);
}

export function scriptedNetlink(refuse: (message: SentMessage) => number = () => 0) {
  const log = {
    /** The IPVS commands (not dumps), in the order the kernel read them. */
    commands: [] as SentMessage[],
    /** How many messages each datagram held. */
    datagrams: [] as number[],
    /** Commands sent whose datagram is not answered yet, and the most there were at once. */
    unanswered: 0,
    mostUnanswered: 0,
    closed: 0,
    silent: false,
  };
  let listener: ((datagram: Buffer) => void) | undefined;
  const pending: { count: number; answers: Buffer[] }[] = [];
  const answerAll = () => {
    for (const { count, answers } of pending.splice(0)) {
      log.unanswered -= count;
      for (const answer of answers) listener?.(answer);
    }
  };
  const socket: DatagramSocket = {
    send(datagram, _options, callback) {
      const answers: Buffer[] = [];
      let commands = 0;
      let count = 0;
      for (let at = 0; at < datagram.length; ) {
        const length = datagram.readUInt32LE(at);
        const message: SentMessage = {
          type: datagram.readUInt16LE(at + 4),
          flags: datagram.readUInt16LE(at + 6),
          seq: datagram.readUInt32LE(at + 8),
          cmd: datagram[at + 16]!,
          body: datagram.subarray(at + 20, at + length),
        };
        at += (length + 3) & ~3;
        count += 1;
        if (message.type === GENL_ID_CTRL) {
          const name = parseAttributes(message.body).get(2)?.toString('latin1');
          assert(name === 'IPVS\0', `family lookup of ${name}`);
          const reply = Buffer.concat([
            Buffer.from([1, 2, 0, 0]),
            u16(1, IPVS_FAMILY),
            attribute(2, Buffer.from(name)),
          ]);
          answers.push(header(GENL_ID_CTRL, 0, message.seq, reply), errorAnswer(message, 0));
          continue;
        }
        assert(message.type === IPVS_FAMILY, `a message of family ${message.type}`);
        if ((message.flags & NLM_F_DUMP) === NLM_F_DUMP) {
          answers.push(header(NLMSG_DONE, 0x2, message.seq, Buffer.alloc(4)));
          continue;
        }
        log.commands.push(message);
        commands += 1;
        const errno = refuse(message);
        if (errno !== 0 || message.flags & NLM_F_ACK) answers.push(errorAnswer(message, errno));
      }
      log.datagrams.push(count);
      log.unanswered += commands;
      log.mostUnanswered = Math.max(log.mostUnanswered, log.unanswered);
      callback();
      if (log.silent) return;
      if (pending.length === 0) setImmediate(answerAll);
      pending.push({ count: commands, answers });
    },
    on(event: string, l: (arg: never) => void) {
      if (event === 'message') listener = l as (datagram: Buffer) => void;
      return socket;
    },
    ref() {},
    unref() {},
    close() {
      log.closed += 1;
    },
  };
  return { socket, log };
}

function assert(ok: boolean, what: string): asserts ok {
  if (!ok) throw new Error(`scripted netlink: unexpected ${what}`);
}
