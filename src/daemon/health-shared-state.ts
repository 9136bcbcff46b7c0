// What the health listener's thread (health-listener-thread.ts) answers from, in shared memory:
// the main thread publishes ProxyHealth's state and beats a heartbeat here, and that thread reads
// both when a probe comes, so /healthz and /livez are answered while the main thread is busy (a
// full sync's slices, a collection of a large heap) instead of after it. Each value is one 64-bit
// slot written and read with Atomics, so a reader never sees half of one.

const LIVE = 0;
const NODE_ELIGIBLE = 1;
/** ms since the epoch (the daemon's clock: whole milliseconds). */
const LAST_UPDATED = 2;
/** ns of the monotonic clock (process.hrtime), the same in every thread of the process. */
const HEARTBEAT = 3;
const SLOTS = 4;

/** ProxyHealth's state as the health endpoints need it (health.ts says what each means). */
export interface PublishedHealth {
  /** No cause fails /livez: unsynced and api-server are clear. */
  readonly live: boolean;
  /** No node cause: /healthz is live and this. */
  readonly nodeEligible: boolean;
  readonly lastUpdated: number;
}

export class SharedHealthState {
  readonly buffer: SharedArrayBuffer;
  readonly #slots: BigInt64Array;

  /** A new state (healthy, never updated, beaten now), or the one another thread made. */
  constructor(buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(SLOTS * BigInt64Array.BYTES_PER_ELEMENT);
    this.#slots = new BigInt64Array(this.buffer);
    if (buffer === undefined) {
      this.publish({ live: true, nodeEligible: true, lastUpdated: 0 });
      this.beat();
    }
  }

  publish(health: PublishedHealth): void {
    Atomics.store(this.#slots, LIVE, health.live ? 1n : 0n);
    Atomics.store(this.#slots, NODE_ELIGIBLE, health.nodeEligible ? 1n : 0n);
    Atomics.store(this.#slots, LAST_UPDATED, BigInt(health.lastUpdated));
  }

  read(): PublishedHealth {
    return {
      live: Atomics.load(this.#slots, LIVE) === 1n,
      nodeEligible: Atomics.load(this.#slots, NODE_ELIGIBLE) === 1n,
      lastUpdated: Number(Atomics.load(this.#slots, LAST_UPDATED)),
    };
  }

  /** The main thread runs: now. */
  beat(): void {
    Atomics.store(this.#slots, HEARTBEAT, process.hrtime.bigint());
  }

  /** Since the last beat. */
  silentForMs(): number {
    return Number(process.hrtime.bigint() - Atomics.load(this.#slots, HEARTBEAT)) / 1e6;
  }
}
