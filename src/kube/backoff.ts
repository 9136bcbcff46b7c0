// Capped exponential backoff with jitter, as client-go's reflector uses between failed lists and
// watches, so that many nodes do not hammer a recovering API server in lockstep.

/** The default cap: no retry of a failed list or watch waits longer (jitter included). */
export const BACKOFF_MAX_MS = 30_000;

export interface BackoffOptions {
  readonly initialMs?: number;
  readonly maxMs?: number;
  /** Random source in [0, 1); injectable so tests are deterministic. */
  readonly random?: () => number;
}

export class Backoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;
  #failures = 0;

  constructor(options: BackoffOptions = {}) {
    this.#initialMs = options.initialMs ?? 800;
    this.#maxMs = options.maxMs ?? BACKOFF_MAX_MS;
    this.#random = options.random ?? Math.random;
  }

  /** The delay before the next attempt: doubling from initialMs, capped, then jittered by up to +100%, capped again. */
  next(): number {
    const base = Math.min(this.#maxMs, this.#initialMs * 2 ** Math.min(this.#failures, 30));
    this.#failures++;
    return Math.min(this.#maxMs, Math.round(base * (1 + this.#random())));
  }

  reset(): void {
    this.#failures = 0;
  }
}
