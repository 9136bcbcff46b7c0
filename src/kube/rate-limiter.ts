// Client-side rate limit on API requests, as client-go's flowcontrol token bucket: `burst` requests
// may go at once, then `qps` a second. A request that finds the bucket empty takes a token on credit
// and waits until it would have refilled, so waiters go in arrival order.

import type { Clock } from '../../contract/base/clock.ts';

export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;

  constructor(qps: number, burst: number, clock: Clock) {
    if (!(qps > 0) || !(burst >= 1))
      throw new Error(`rate limit needs qps > 0 and burst >= 1 (got ${qps}, ${burst})`);
    this.#qps = qps;
    this.#burst = burst;
    this.#clock = clock;
    this.#tokens = burst;
    this.#last = clock.now();
  }

  /** Takes a token now and says how long to wait before using it (0: go ahead). */
  reserve(): number {
    this.#refill();
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#qps) * 1000;
  }

  /** Waits for a token; false when `signal` aborted first (the token is given back). */
  wait(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    const delay = this.reserve();
    if (delay === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const onAbort = (): void => {
        timer.cancel();
        this.#refill();
        this.#tokens = Math.min(this.#burst, this.#tokens + 1);
        resolve(false);
      };
      const timer = this.#clock.setTimer(delay, () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #refill(): void {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    this.#last = now;
  }
}
