// Long pure computations (a whole model build, a full ruleset) written once as generators that
// yield at points where they may pause. Dry-run and tests run them straight through; the daemon
// runs them in slices of a few milliseconds and lets the event loop run in between, so /healthz,
// /metrics and informer events are served during a full sync of any size.
import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers/promises';

/** Work that yields (nothing) wherever it may pause, and returns its result. */
export type Steps<T> = Generator<void, T, void>;

/**
 * How long work runs before the event loop gets a turn: short enough that a health probe waits
 * far less than its 100 ms budget, long enough that giving way costs little (~0.1 %).
 */
export const SLICE_MS = 10;

/** Runs every step at once. */
export function runAll<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Runs the steps, giving way to the event loop whenever `sliceMs` have passed since it last did. */
export async function runInSlices<T>(steps: Steps<T>, sliceMs = SLICE_MS): Promise<T> {
  const slicer = new Slicer(sliceMs);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    await slicer.pause();
  }
}

/** For async code with many small steps: pause() gives way once a slice's time is used up. */
export class Slicer {
  readonly #sliceMs: number;
  #start = performance.now();

  constructor(sliceMs = SLICE_MS) {
    this.#sliceMs = sliceMs;
  }

  /** Resolves at once within a slice; after a turn of the event loop once the slice is over. */
  async pause(): Promise<void> {
    if (performance.now() - this.#start < this.#sliceMs) return;
    await setImmediate();
    this.#start = performance.now();
  }
}

/** Items sorted between two steps of sortSteps (each run sorted at once, then merged in steps). */
const SORTED_PER_STEP = 4096;

/**
 * `items` sorted (a new array; stable, as Array.prototype.sort) in steps: runs sorted at once, then
 * merged pairwise. A sort of the 330,000 chain names of 30,000 Services takes seconds on a busy
 * machine, too long for one turn of the daemon's event loop.
 */
export function* sortSteps<T>(items: readonly T[], compare: (a: T, b: T) => number): Steps<T[]> {
  let from: T[] = [];
  for (let start = 0; start < items.length; start += SORTED_PER_STEP) {
    for (const item of items.slice(start, start + SORTED_PER_STEP).sort(compare)) from.push(item);
    yield;
  }
  const n = from.length;
  for (let width = SORTED_PER_STEP; width < n; width *= 2) {
    const to: T[] = new Array<T>(n);
    let written = 0;
    for (let low = 0; low < n; low += 2 * width) {
      const middle = Math.min(low + width, n);
      const high = Math.min(low + 2 * width, n);
      let left = low;
      let right = middle;
      for (let at = low; at < high; at++) {
        // The left run's item first on ties: stable.
        to[at] =
          right >= high || (left < middle && compare(from[left]!, from[right]!) <= 0)
            ? from[left++]!
            : from[right++]!;
        if (++written % SORTED_PER_STEP === 0) yield;
      }
    }
    from = to;
  }
  return from;
}
