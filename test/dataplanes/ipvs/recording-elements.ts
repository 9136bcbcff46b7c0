// An nf_tables element writer whose socket records each datagram and acknowledges it as the kernel
// would, and the elements of those datagrams (or of nft `add element` text, encoded by the same
// encoder) as one list: what the live IPVS dataplane sent by netlink, held against what render
// prints, however the batches were cut.
import { COMPANION_TABLE, companionSets } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { parseAttributes } from '../../../dataplanes/shared/netlink-attributes.ts';
import { type DatagramSocket, NetlinkSocket } from '../../../dataplanes/shared/netlink-socket.ts';
import { type ElementOp, elementBatch } from '../../../dataplanes/shared/nft/element-batch.ts';
import { setLayout } from '../../../dataplanes/shared/nft/element-encoding.ts';
import { familySyntax } from '../../../dataplanes/shared/nft/family-syntax.ts';
import { NetlinkElementWriter } from '../../../dataplanes/shared/nft/netlink-elements.ts';
import type { ElementSpec, NftFamily } from '../../../dataplanes/shared/nft/transaction.ts';

const NLMSG_ERROR = 2;
const NLM_F_ACK = 0x4;
const NFT_MSG_NEWSETELEM = 0x0a0c;
const NFT_MSG_DELSETELEM = 0x0a0e;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;

/** A writer of the companion table's elements whose datagrams of at most `maxBytes` are kept. */
export function recordingElementWriter(maxBytes: number): {
  writer: NetlinkElementWriter;
  datagrams: Buffer[];
} {
  const datagrams: Buffer[] = [];
  let listener: ((datagram: Buffer) => void) | undefined;
  const socket: DatagramSocket = {
    send(datagram, _options, callback) {
      datagrams.push(Buffer.from(datagram));
      const answers: Buffer[] = [];
      for (const { at, flags, seq } of messages(datagram)) {
        if ((flags & NLM_F_ACK) === 0) continue;
        const answer = Buffer.alloc(16 + 4 + 16);
        answer.writeUInt32LE(answer.length, 0);
        answer.writeUInt16LE(NLMSG_ERROR, 4);
        answer.writeUInt32LE(seq, 8);
        datagram.copy(answer, 20, at, at + 16);
        answers.push(answer);
      }
      callback();
      // On the next tick, before any timer: a busy machine's turn of the event loop can outlast
      // any bound given below.
      process.nextTick(() => listener?.(Buffer.concat(answers)));
    },
    on(event: 'message' | 'error', handler: (value: never) => void) {
      if (event === 'message') listener = handler as (datagram: Buffer) => void;
      return socket;
    },
    ref() {},
    unref() {},
    close() {},
  };
  // The answers come on the next tick: the socket's bound is never reached.
  const writer = new NetlinkElementWriter(
    new NetlinkSocket(socket, 120_000),
    maxBytes,
    COMPANION_TABLE,
    companionSets,
  );
  return { writer, datagrams };
}

function* messages(
  datagram: Buffer,
): Generator<{ at: number; type: number; flags: number; seq: number; length: number }> {
  for (let at = 0; at + 16 <= datagram.length; ) {
    const length = datagram.readUInt32LE(at);
    yield {
      at,
      type: datagram.readUInt16LE(at + 4),
      flags: datagram.readUInt16LE(at + 6),
      seq: datagram.readUInt32LE(at + 8),
      length,
    };
    at += (length + 3) & ~3;
  }
}

/** Each element of the datagrams' element messages: verb, family, set and its encoding in hex. */
export function sentElements(datagrams: readonly Buffer[]): string[] {
  const out: string[] = [];
  for (const datagram of datagrams) {
    for (const { at, type, length } of messages(datagram)) {
      if (type !== NFT_MSG_NEWSETELEM && type !== NFT_MSG_DELSETELEM) continue;
      const verb = type === NFT_MSG_NEWSETELEM ? 'add' : 'delete';
      const family = datagram[at + 16] === 2 ? 'ip' : 'ip6';
      const attributes = parseAttributes(datagram.subarray(at + 20, at + length));
      const set = attributes.get(NFTA_SET_ELEM_LIST_SET)!.toString('utf8').replace(/\0+$/, '');
      const nest = attributes.get(NFTA_SET_ELEM_LIST_ELEMENTS) ?? Buffer.alloc(0);
      for (let e = 0; e + 4 <= nest.length; ) {
        const size = nest.readUInt16LE(e);
        out.push(`${verb} ${family} ${set} ${nest.subarray(e, e + size).toString('hex')}`);
        e += (size + 3) & ~3;
      }
    }
  }
  return out;
}

const COMMAND = /^(add|delete) element (ip6?) (\S+) (\S+) \{(?: (.*) \}|)$/;
const ELEMENT = /^(.*?)(?: comment "([^"]*)")?(?: : (.*))?$/;

/** The elements of nft `add element` text (render's spelling), encoded as the writer encodes them. */
export function scriptElements(script: string): string[] {
  const layouts = new Map(
    (['IPv4', 'IPv6'] as const).flatMap((ipFamily) =>
      companionSets(familySyntax(ipFamily)).map((set) => [
        `${familySyntax(ipFamily).family} ${set.name}`,
        setLayout(set),
      ]),
    ),
  );
  const ops: ElementOp[] = [];
  const lines = script.split('\n').filter((line) => line !== '');
  for (let i = 0; i < lines.length; i++) {
    const command = COMMAND.exec(lines[i]!);
    if (!command) throw new Error(`not an element command: ${lines[i]}`);
    const [, verb, family, table, set, one] = command;
    if (table !== COMPANION_TABLE) throw new Error(`element of table ${table}`);
    const texts: string[] = [];
    if (one !== undefined) texts.push(one);
    else while (lines[++i] !== '}') texts.push(lines[i]!.replace(/^\t/, '').replace(/,$/, ''));
    const elements = texts.map((text): ElementSpec => {
      const [, key, comment, value] = ELEMENT.exec(text)!;
      return { key: key!, ...(comment !== undefined && { comment }), ...(value !== undefined && { value }) };
    });
    const layout = layouts.get(`${family} ${set}`);
    if (!layout) throw new Error(`no layout for ${family} ${set}`);
    ops.push({ verb: verb as 'add' | 'delete', family: family as NftFamily, set: set!, layout, elements });
  }
  return sentElements([elementBatch(COMPANION_TABLE, ops).datagram.frame(1)]);
}
