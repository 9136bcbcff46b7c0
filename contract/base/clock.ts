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

/** setTimeout's limit: a longer delay (a syncPeriod of 1000h) becomes 1 ms, a busy loop of syncs. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fn) {
    // Firing after 24.8 days instead of later is harmless: a timer only ever starts a sync.
    const handle = setTimeout(fn, Math.min(delayMs, MAX_TIMER_MS));
    return { cancel: () => clearTimeout(handle) };
  },
};
