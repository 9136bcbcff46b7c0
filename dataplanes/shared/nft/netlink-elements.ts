// Writing a transaction's set and map elements as one nf_tables netlink batch instead of nft text:
// nft spends ~30 us per element parsing, evaluating and building its cache (at 30k services x 10
// endpoints ~4.3 s in user space of a ~7 s load); the batch is encoded in place (element-batch.ts).
//
// A transaction is split in three, in its own order: its text operations before the elements
// (only additions no packet meets until an element refers to them: new sets, new chains and
// their rules), the element operations (adds, deletes, set flushes) as one batch, and its text
// operations after them (deleting chains and sets no element refers to any more). Each part is
// atomic, the whole is not, but what packets meet changes only with the batch: a refused batch
// leaves it as it was (plus unreferenced new chains), fails the sync with a DataplaneError, and
// the live dataplane's next sync is a full one (adoption deletes the stale chains). A transaction
// that cannot be split so (a table replaced, a chain rewritten, a set whose type the encoder does
// not know) or whose batch exceeds one datagram (the only atomic unit: see netlink-socket.ts) goes
// to nft whole, as before. In nftables mode, cold starts' pieces and fragments (endpoint changes)
// split, full syncs on a node with our tables go to nft; in IPVS mode, the companion table's
// incremental transactions split, and a cold start's elements go apart in as many batches as they
// take (writeElementsApart: its table has no hook yet, hooks-last.ts).

import type { IPFamily } from '../../../contract/base/ip-family.ts';
import { runAll, runInSlices, type Steps } from '../../../contract/base/work-slices.ts';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import { errnoName, NetlinkSocket, openNetfilterNetlink } from '../netlink-socket.ts';
import {
  type ElementBatch,
  type ElementCursor,
  type ElementOp,
  elementBatch,
  elementBatchSteps,
  elementPiece,
} from './element-batch.ts';
import { type SetLayout, setLayout } from './element-encoding.ts';
import { type FamilySyntax, familySyntax } from './family-syntax.ts';
import { type NftFamily, type NftOp, NftTransaction, type SetSpec } from './transaction.ts';

/** The sets a table declares in a family, whose elements the writer may write. */
export type TableSets = (syntax: FamilySyntax) => readonly SetSpec[];

/** Asked of the kernel; it gives at most twice net.core.wmem_max (Debian's default: 416 KiB). */
export const SEND_BUFFER = 64 << 20;
/** A big batch commits in seconds; this only ends a stuck socket. */
const ANSWER_TIMEOUT_MS = 120_000;

/** A transaction split for the element writer: nft text, one batch's operations, nft text. */
export interface SplitTransaction {
  readonly before: NftTransaction;
  readonly ops: readonly ElementOp[];
  readonly after: NftTransaction;
}

/** The kernel refused an element batch; nothing of it was applied. */
export class ElementBatchError extends DataplaneError {
  constructor(message: string) {
    super(message);
    this.name = 'ElementBatchError';
  }
}

export class NetlinkElementWriter {
  readonly #socket: NetlinkSocket;
  readonly #table: string;
  /** The largest datagram the socket may send: a batch is atomic only within one. */
  readonly maxBytes: number;
  readonly #layouts = new Map<string, SetLayout | undefined>();
  /** Batches committed (the tests and the bench check the writer was used). */
  batches = 0;

  constructor(socket: NetlinkSocket, maxBytes: number, table: string, sets: TableSets) {
    this.#socket = socket;
    this.maxBytes = maxBytes;
    this.#table = table;
    for (const [family, ipFamily] of [
      ['ip', 'IPv4'],
      ['ip6', 'IPv6'],
    ] as const satisfies readonly (readonly [NftFamily, IPFamily])[]) {
      for (const set of sets(familySyntax(ipFamily)))
        this.#layouts.set(`${family} ${set.name}`, setLayout(set));
    }
  }

  /**
   * A writer of `table`'s elements on a netfilter socket in this process's network namespace;
   * `sendBuffer` what it asks for (the bench asks for Debian's default to see a host that has not
   * raised wmem_max).
   */
  static open(table: string, sets: TableSets, sendBuffer = SEND_BUFFER): NetlinkElementWriter {
    const raw = openNetfilterNetlink(sendBuffer);
    // netlink_sendmsg refuses a datagram longer than the send buffer less 32 bytes.
    const maxBytes = raw.getSendBufferSize() - 32;
    return new NetlinkElementWriter(new NetlinkSocket(raw, ANSWER_TIMEOUT_MS), maxBytes, table, sets);
  }

  close(): void {
    this.#socket.close();
  }

  /** `tx` in nft text, one batch and nft text; undefined when it must go to nft whole. */
  split(tx: NftTransaction): SplitTransaction | undefined {
    if (tx.table !== this.#table) return undefined;
    const before = new NftTransaction(tx.table);
    const after = new NftTransaction(tx.table);
    const ops: ElementOp[] = [];
    const withElements = new Set<NftFamily>();
    const closed = new Set<NftFamily>();
    const newChains = new Set<string>();
    for (const op of tx.ops) {
      if (op.object === 'set' && op.verb === 'add')
        this.#layouts.set(`${op.family} ${op.set.name}`, setLayout(op.set));
      if (op.object === 'chain' && op.verb === 'add') newChains.add(`${op.family} ${op.chain.name}`);
      const elementOp = this.#elementOp(op);
      if (elementOp === null) return undefined;
      if (elementOp) {
        if (closed.has(op.family)) return undefined;
        ops.push(elementOp);
        withElements.add(op.family);
      } else if (unseenByPackets(op, newChains) && !withElements.has(op.family)) {
        before.push(op);
      } else if (dropsReferences(op) && withElements.has(op.family)) {
        after.push(op);
        closed.add(op.family);
      } else return undefined;
    }
    return ops.length === 0 ? undefined : { before, ops, after };
  }

  /** The batch of a split transaction, in steps; undefined when it exceeds one datagram. */
  *batchSteps(split: SplitTransaction): Steps<ElementBatch | undefined> {
    const batch = yield* elementBatchSteps(this.#table, split.ops);
    return batch.datagram.attributes.length > this.maxBytes ? undefined : batch;
  }

  /** Sends the batch: applied whole, or refused whole (ElementBatchError naming what was refused). */
  async write(split: SplitTransaction, batch: ElementBatch): Promise<void> {
    const answers = await this.#socket.send(batch.datagram).catch((error: Error) => {
      // No room for the answers (ENOBUFS), none in time: whether the batch was committed is
      // unknown, and the sync falls back to a full one, as after a refusal.
      throw new ElementBatchError(`nf_tables element batch: ${error.message}`);
    });
    if (answers.refused.size === 0) {
      this.batches++;
      return;
    }
    // Refusals name messages; a check batch of one element per message (not committed) names
    // the elements.
    const check = elementBatch(this.#table, split.ops, { elementsPerMessage: 1, commit: false });
    const named = await this.#socket.send(check.datagram).catch(() => undefined);
    const refusals =
      named && named.refused.size > 0
        ? { batch: check, refused: named.refused }
        : { batch, refused: answers.refused };
    throw new ElementBatchError(
      `nf_tables element batch refused: ${describe(refusals.batch, refusals.refused)}`,
    );
  }

  /** The element operation of `op`; undefined for a text operation, null for one it cannot write. */
  #elementOp(op: NftOp): ElementOp | undefined | null {
    if (op.object === 'element') {
      const layout = this.#layouts.get(`${op.family} ${op.set}`);
      return layout ? { verb: op.verb, family: op.family, set: op.set, layout, elements: op.elements } : null;
    }
    if (op.object === 'set' && op.verb === 'flush') {
      // Only sets whose elements the writer knows: not those the packet path fills.
      return this.#layouts.get(`${op.family} ${op.name}`)
        ? { verb: 'flush', family: op.family, set: op.name }
        : null;
    }
    return undefined;
  }
}

/**
 * Applies `tx`: its text before the elements by `nft`, the elements as one batch, then its text
 * after, when `writer` can split it and the batch fits one datagram; else all of it by `nft`.
 */
export async function writeTransaction(
  tx: NftTransaction,
  writer: NetlinkElementWriter | undefined,
  nft: (script: string) => Promise<void>,
): Promise<void> {
  const split = writer?.split(tx);
  const batch = split && runAll(writer!.batchSteps(split));
  if (!split || !batch) return nft(tx.toString());
  await writeSplit(writer!, split, batch, nft);
}

/** A split transaction: its text before the elements by `nft`, the batch, then its text after. */
export async function writeSplit(
  writer: NetlinkElementWriter,
  split: SplitTransaction,
  batch: ElementBatch,
  nft: (script: string) => Promise<void>,
): Promise<void> {
  if (!split.before.empty) await nft(split.before.toString());
  await writer.write(split, batch);
  if (!split.after.empty) await nft(split.after.toString());
}

/**
 * Text operations that may go before the elements in a transaction of their own: additions no
 * packet meets until an element refers to them (sets, chains, rules of chains new in `tx`; adding
 * a table or set that exists changes nothing). So a refused batch leaves what packets see as it was.
 */
function unseenByPackets(op: NftOp, newChains: ReadonlySet<string>): boolean {
  if (op.verb !== 'add') return false;
  if (op.object === 'rule') return newChains.has(`${op.family} ${op.chain}`);
  return (
    (op.object === 'chain' && op.chain.base === undefined) || op.object === 'set' || op.object === 'table'
  );
}

/** Text operations that may follow the elements: removing what they no longer refer to. */
function dropsReferences(op: NftOp): boolean {
  return (op.object === 'chain' && op.verb !== 'add') || (op.object === 'set' && op.verb === 'delete');
}

/** At most this many refusals are spelled out. */
const NAMED = 5;

function describe(batch: ElementBatch, refused: ReadonlyMap<number, number>): string {
  const parts: string[] = [];
  for (const [index, errno] of [...refused].slice(0, NAMED)) {
    const origin = batch.origins[index];
    if (!origin) {
      parts.push(`the batch as a whole: ${errnoName(errno)}`);
      continue;
    }
    const { op } = origin;
    const where = `${op.family} ${op.set}`;
    if (op.verb === 'flush') {
      parts.push(`flush set ${where}: ${errnoName(errno)}`);
      continue;
    }
    const elements = op.elements
      .slice(origin.from, origin.to)
      .map((e) => (e.value === undefined || op.verb === 'delete' ? e.key : `${e.key} : ${e.value}`));
    const shown =
      elements.length > 3
        ? `${elements.slice(0, 3).join(', ')}, … (${elements.length})`
        : elements.join(', ');
    parts.push(`${op.verb} element ${where} { ${shown} }: ${errnoName(errno)}`);
  }
  if (refused.size > NAMED) parts.push(`and ${refused.size - NAMED} more`);
  return parts.join('; ');
}

/** Elements of the first batch writeElementsApart sends: the next ones are sized by its bytes. */
const FIRST_PIECE = 1000;

/**
 * Writes `tx`, which holds element operations only, in as many batches as they take, each one
 * datagram (so each atomic alone, not the whole): for elements no packet meets until a later
 * transaction hooks their table (hooks-last.ts). False, having sent nothing, when the writer
 * cannot write them.
 */
export async function writeElementsApart(writer: NetlinkElementWriter, tx: NftTransaction): Promise<boolean> {
  const split = writer.split(tx);
  if (split === undefined || !split.before.empty || !split.after.empty) return false;
  let at: ElementCursor | undefined = { op: 0, element: 0 };
  let size = FIRST_PIECE;
  while (at !== undefined) {
    const piece = elementPiece(split.ops, at, size);
    const pieceSplit: SplitTransaction = { before: split.before, ops: piece.ops, after: split.after };
    const batch = await runInSlices(writer.batchSteps(pieceSplit));
    if (batch === undefined) {
      if (piece.count === 1)
        throw new ElementBatchError('nf_tables element batch: one element exceeds a datagram');
      size = Math.ceil(piece.count / 2);
      continue;
    }
    await writer.write(pieceSplit, batch);
    // The next piece as many elements as fit at this one's bytes per element, with a tenth to spare.
    size = Math.floor((0.9 * piece.count * writer.maxBytes) / batch.datagram.attributes.length);
    at = piece.next;
  }
  return true;
}
