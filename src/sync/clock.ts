// Time and timers behind a small interface, so the sync loop and health checks run on a fake clock
// in tests (no sleeps) and on the real one in the daemon.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimer(delayMs: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fn) {
    const handle = setTimeout(fn, delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
};
