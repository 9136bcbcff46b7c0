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
