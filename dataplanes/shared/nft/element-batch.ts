// An nf_tables netlink batch of element operations: NFNL_MSG_BATCH_BEGIN, NFT_MSG_NEWSETELEM /
// NFT_MSG_DELSETELEM messages (a set flush is a DELSETELEM naming no element), NFNL_MSG_BATCH_END,
// in one datagram. The kernel runs a batch as one transaction: every message applies or none.
// Errors come back per message (its sequence number); `origins` says which operation and which of
// its elements each message carries, so a refusal names the plan's elements.
import { runAll, type Steps } from '../../../contract/base/work-slices.ts';
import { NetlinkDatagram } from '../netlink-socket.ts';
import { type SetLayout, writeElement } from './element-encoding.ts';
import type { ElementSpec, NftFamily } from './transaction.ts';

const NFNL_SUBSYS_NFTABLES = 10;
const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;
const NFT_MSG_NEWSETELEM = 12;
const NFT_MSG_DELSETELEM = 14;
const NLM_F_CREATE = 0x400;
const NLA_F_NESTED = 0x8000;
const NFTA_SET_ELEM_LIST_TABLE = 1;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
const NFPROTO: Readonly<Record<NftFamily, number>> = { ip: 2, ip6: 10 };

/**
 * An element nest's length is 16 bits: a message's elements stop short of it, with room for one
 * more element (key, key end, data and a 128-byte comment take well under 512 bytes).
 */
const ELEMENTS_BYTES = 0xffff - 512;

/** One operation of a batch: elements added to or deleted from a set, or a set flushed. */
export type ElementOp =
  | {
      readonly verb: 'add' | 'delete';
      readonly family: NftFamily;
      readonly set: string;
      readonly layout: SetLayout;
      readonly elements: readonly ElementSpec[];
    }
  | { readonly verb: 'flush'; readonly family: NftFamily; readonly set: string };

/** What a message of the batch carries: its operation and elements [from, to). */
export interface MessageOrigin {
  readonly op: ElementOp;
  readonly from: number;
  readonly to: number;
}

export interface ElementBatch {
  readonly datagram: NetlinkDatagram;
  /** By message index; undefined for the batch's begin and end. */
  readonly origins: readonly (MessageOrigin | undefined)[];
}

export interface BatchOptions {
  /** Most elements per message (1: a refusal names its element). */
  readonly elementsPerMessage?: number;
  /** False: no end message, so the kernel aborts the batch and only reports (a check). */
  readonly commit?: boolean;
}

/** Elements encoded per step: ~1 ms of work (work-slices.ts). */
const ELEMENTS_PER_STEP = 1000;

/**
 * The buffer a batch's datagram starts with: about its size (a message's header and names under
 * 64 bytes, 128 per element: ~50 without a comment, ~200 with one), up to 1 MiB; it grows past that.
 * An endpoint change is a few hundred bytes: the socket's 8 KiB default, a zeroed allocation per
 * change, was about half of encoding it (a CPU profile).
 */
function startBytes(ops: readonly ElementOp[]): number {
  let bytes = 64;
  for (const op of ops) bytes += 64 + (op.verb === 'flush' ? 0 : 128 * op.elements.length);
  return Math.min(bytes, 1 << 20);
}

export function elementBatch(
  table: string,
  ops: readonly ElementOp[],
  options: BatchOptions = {},
): ElementBatch {
  return runAll(elementBatchSteps(table, ops, options));
}

/** elementBatch in steps: a cold start's piece is tens of thousands of elements. */
export function* elementBatchSteps(
  table: string,
  ops: readonly ElementOp[],
  options: BatchOptions = {},
): Steps<ElementBatch> {
  const perMessage = options.elementsPerMessage ?? Number.POSITIVE_INFINITY;
  const datagram = new NetlinkDatagram(startBytes(ops));
  const w = datagram.attributes;
  const origins: (MessageOrigin | undefined)[] = [];
  datagram.message(NFNL_MSG_BATCH_BEGIN, 0, 0, 0, NFNL_SUBSYS_NFTABLES);
  origins.push(undefined);
  const start = (op: ElementOp, from: number): number => {
    const type = op.verb === 'add' ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM;
    datagram.message(
      (NFNL_SUBSYS_NFTABLES << 8) | type,
      NFPROTO[op.family],
      0,
      op.verb === 'add' ? NLM_F_CREATE : 0,
    );
    w.string(NFTA_SET_ELEM_LIST_TABLE, table);
    w.string(NFTA_SET_ELEM_LIST_SET, op.set);
    origins.push({ op, from, to: from });
    return origins.length - 1;
  };
  for (const op of ops) {
    if (op.verb === 'flush') {
      start(op, 0);
      continue;
    }
    let from = 0;
    while (from < op.elements.length) {
      const index = start(op, from);
      const nest = w.begin(NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED);
      let to = from;
      while (to < op.elements.length && to - from < perMessage && w.length - nest < ELEMENTS_BYTES) {
        writeElement(w, op.layout, op.elements[to]!, op.verb === 'add');
        if (++to % ELEMENTS_PER_STEP === 0) yield;
      }
      w.end(nest);
      origins[index] = { op, from, to };
      from = to;
    }
  }
  // The last operation's message asks for the acknowledgement: the end message is never answered.
  datagram.ackBatchHere();
  if (options.commit !== false) {
    datagram.message(NFNL_MSG_BATCH_END, 0, 0, 0, NFNL_SUBSYS_NFTABLES);
    origins.push(undefined);
  }
  return { datagram, origins };
}

/** Where a walk of element operations is: an operation's index and one of its elements'. */
export interface ElementCursor {
  readonly op: number;
  readonly element: number;
}

/** A run of element operations cut from a longer list (elementPiece). */
export interface ElementPiece {
  readonly ops: readonly ElementOp[];
  /** Its elements, a flush counting one. */
  readonly count: number;
  /** Where the next piece starts; undefined after the last. */
  readonly next: ElementCursor | undefined;
}

/**
 * Up to `count` (at least 1) elements of `ops` from `at` on, in order, as operations of their own:
 * a batch too large for one datagram, cut into batches that fit.
 */
export function elementPiece(ops: readonly ElementOp[], at: ElementCursor, count: number): ElementPiece {
  const want = Math.max(1, count);
  const piece: ElementOp[] = [];
  let taken = 0;
  let { op: index, element } = at;
  while (index < ops.length && taken < want) {
    const op = ops[index]!;
    if (op.verb === 'flush') {
      piece.push(op);
      taken++;
      index++;
      continue;
    }
    const to = Math.min(op.elements.length, element + want - taken);
    piece.push(
      element === 0 && to === op.elements.length ? op : { ...op, elements: op.elements.slice(element, to) },
    );
    taken += to - element;
    if (to < op.elements.length) element = to;
    else {
      index++;
      element = 0;
    }
  }
  return { ops: piece, count: taken, next: index < ops.length ? { op: index, element } : undefined };
}
