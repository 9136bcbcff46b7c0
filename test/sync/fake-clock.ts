// A manual clock for the sync loop and health tests: time moves only when the test says so, and
// timers fire in order as it moves, with pending promise work settled after each one.
import { setImmediate as settle } from 'node:timers/promises';
import type { Clock, Timer } from '../../contract/base/clock.ts';

interface Pending {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #pending: Pending[] = [];

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(delayMs: number, fn: () => void): Timer {
    const entry = { at: this.#now + delayMs, seq: this.#seq++, fn };
    this.#pending.push(entry);
    return { cancel: () => (this.#pending = this.#pending.filter((p) => p !== entry)) };
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    await flush();
    for (;;) {
      const next = this.#pending
        .filter((p) => p.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.#pending = this.#pending.filter((p) => p !== next);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
      await flush();
    }
    this.#now = target;
  }

  get pendingTimers(): number {
    return this.#pending.length;
  }
}

/** Lets promise chains started by timers run to completion (a few macrotask turns). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await settle();
}
