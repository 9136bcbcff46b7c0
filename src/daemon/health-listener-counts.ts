// What the health listener's thread answered and refused, counted in shared memory for the main
// thread's metrics (kubeproxy_proxy_healthz_total, kubeproxy_proxy_livez_total,
// kproxy_http_refused_requests_total{listener="healthz"}): that thread cannot reach the registry,
// and a message per answer would arrive only when the main thread runs, after a scrape that came
// first. A count is in place before its answer is written, so a scrape after an answer sees it.
import { REFUSAL_REASONS, type RefusalReason } from './http-listener.ts';

export type HealthPath = '/healthz' | '/livez';
/** The codes the health endpoints count (a 404 is not counted, as in kube-proxy). */
export type HealthCode = 200 | 503;

const ANSWERS: readonly (readonly [HealthPath, HealthCode])[] = [
  ['/healthz', 200],
  ['/healthz', 503],
  ['/livez', 200],
  ['/livez', 503],
];
const SLOTS = ANSWERS.length + REFUSAL_REASONS.length;

export interface Counted<T> {
  readonly what: T;
  readonly count: number;
}

export interface HealthListenerTally {
  readonly answers: readonly Counted<readonly [HealthPath, HealthCode]>[];
  readonly refusals: readonly Counted<RefusalReason>[];
}

export class HealthListenerCounts {
  readonly buffer: SharedArrayBuffer;
  readonly #slots: BigInt64Array;
  /** What take() returned so far (the main thread's side only). */
  readonly #taken = new BigInt64Array(SLOTS);

  constructor(buffer = new SharedArrayBuffer(SLOTS * BigInt64Array.BYTES_PER_ELEMENT)) {
    this.buffer = buffer;
    this.#slots = new BigInt64Array(buffer);
  }

  answered(path: HealthPath, code: HealthCode): void {
    Atomics.add(
      this.#slots,
      ANSWERS.findIndex(([p, c]) => p === path && c === code),
      1n,
    );
  }

  refused(reason: RefusalReason): void {
    Atomics.add(this.#slots, ANSWERS.length + REFUSAL_REASONS.indexOf(reason), 1n);
  }

  /** What was counted since the last call, leaving out what did not happen. */
  take(): HealthListenerTally {
    const since = (slot: number): number => {
      const now = Atomics.load(this.#slots, slot);
      const count = Number(now - this.#taken[slot]!);
      this.#taken[slot] = now;
      return count;
    };
    return {
      answers: ANSWERS.map((what, slot) => ({ what, count: since(slot) })).filter((c) => c.count > 0),
      refusals: REFUSAL_REASONS.map((what, i) => ({ what, count: since(ANSWERS.length + i) })).filter(
        (c) => c.count > 0,
      ),
    };
  }
}
