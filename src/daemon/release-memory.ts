// After a full sync V8 keeps the free heap pages of the sync's peak mapped: at 30,000 services
// ~270 MiB of RSS that neither idling (the memory reducer keeps waiting) nor a plain full
// collection gives back. A last-resort collection, what V8 does on a low-memory notification,
// does. Node offers it only as gc(), so the flag is set at run time.
//
// It is also the longest pause kproxy causes itself: full collections repeated while each frees
// anything (seven after a 30k cold start: 0.4–0.9 s of main-thread CPU, /healthz unanswered
// meanwhile; docs/benchmarks-log.md). So it runs only when the heap grew by more than that is worth
// since it last ran: the full sync of a small cluster, or a periodic full resync that peaked
// little, pays nothing.
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Syncer } from '../sync/sync-loop.ts';

/**
 * How far V8 lets the old generation grow past what its last full collection kept before it starts
 * the next, while a full sync runs and until its peak is released: 25 %, against V8's own factor of
 * up to 4x (on a machine with memory). A cold start's garbage outlives two scavenges (its pieces
 * live while nft reads them, and V8 then pretenures the sites that made them, so the fragment index
 * build right after allocates old too): left to V8, it piled up to ~180 MiB above the ~80 MiB that
 * live, the daemon's peak RSS at 30,000 services.
 */
export const FULL_SYNC_HEAP_GROWING_PERCENT = 25;

/**
 * The same between full syncs: 50 %. Under churn what a write replaces lives about as long as the
 * Service goes unchanged (a rollout rewrites each rolled Service about once a second), so it is
 * promoted, ~8 MB a second at 1,000 writes a second; at 25 % that started a full collection every
 * ~3 s at 30,000 services. At 50 % the rollout cost the daemon ~10 % less CPU and ~15 MiB more RSS;
 * at 100 % about as little CPU for ~47 MiB (docs/benchmarks-log.md, "The heap's growth between
 * full syncs").
 */
export const BETWEEN_FULL_SYNCS_HEAP_GROWING_PERCENT = 50;

/** Sets the old generation's growth between full collections; V8 reads it at each one. */
export function setHeapGrowth(percent: number): void {
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/**
 * The daemon's heap growth: capped from the start (the first sync is full) and before every full
 * sync, lifted once a full sync's peak is released unless another full sync began meanwhile.
 */
export class HeapGrowth {
  readonly #set: (percent: number) => void;
  /** Full syncs begun: a lift taken before the latest began must not lift its cap. */
  #fullSyncs = 0;

  constructor(set: (percent: number) => void = setHeapGrowth) {
    this.#set = set;
    set(FULL_SYNC_HEAP_GROWING_PERCENT);
  }

  /** `syncer`, with the growth capped before each full sync it runs. */
  capping(syncer: Syncer): Syncer {
    return {
      sync: (kind) => {
        if (kind === 'full') {
          this.#fullSyncs++;
          this.#set(FULL_SYNC_HEAP_GROWING_PERCENT);
        }
        return syncer.sync(kind);
      },
      intact: () => syncer.intact(),
    };
  }

  /** Taken when a full sync ends: the function lifts the cap, unless a full sync began since. */
  lifter(): () => void {
    const fullSyncs = this.#fullSyncs;
    return () => {
      if (this.#fullSyncs === fullSyncs) this.#set(BETWEEN_FULL_SYNCS_HEAP_GROWING_PERCENT);
    };
  }
}

/** Heap growth (committed bytes) worth a last-resort collection: ~a fifth of the 150 MiB target. */
export const HEAP_GROWTH_WORTH_RELEASING = 32 * 2 ** 20;

/**
 * A function that returns V8's free heap pages to the system when the committed heap grew by at
 * least `worthReleasing` bytes since the last time it did (or since it was made); says whether it did.
 */
export function heapReleaser(worthReleasing = HEAP_GROWTH_WORTH_RELEASING): () => boolean {
  const gc = heapCollector();
  const committed = () => v8.getHeapStatistics().total_heap_size;
  let settled = committed();
  return () => {
    if (committed() - settled < worthReleasing) return false;
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    settled = committed();
    return true;
  };
}

/** V8's gc(): Node offers a collection only through it, so the flag is set at run time. */
export function heapCollector(): (options: object) => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as (options: object) => void;
}
