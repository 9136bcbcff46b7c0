// Probes /healthz from another thread while this one is blocked (Atomics.wait: the thread does not
// run at all, as a daemon's main thread in a long collection or not scheduled on a loaded machine).
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

export interface ProbedAnswer {
  /** ms on the monotonic clock (process.hrtime) of the process's threads. */
  readonly sentMs: number;
  readonly receivedMs: number;
  readonly status: number;
}

export interface BlockedProbes {
  /** When this thread stopped and ran again, on the same clock. */
  readonly blockedAtMs: number;
  readonly resumedAtMs: number;
  readonly answers: readonly ProbedAnswer[];
}

export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Probes `url` one request at a time from another thread; blocks this one for `blockMs` meanwhile. */
export async function probeWhileBlocked(url: string, blockMs: number): Promise<BlockedProbes> {
  const stop = new SharedArrayBuffer(4);
  const prober = new Worker(new URL('./healthz-prober-thread.ts', import.meta.url), {
    workerData: { url, stop },
  });
  const results = new Promise<[bigint, bigint, number][]>((resolve, reject) => {
    prober.on('message', (message: unknown) => {
      if (message !== 'probing') resolve(message as [bigint, bigint, number][]);
    });
    prober.once('error', reject);
  });
  await once(prober, 'message');
  const blockedAtMs = monotonicMs();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, blockMs);
  const resumedAtMs = monotonicMs();
  Atomics.store(new Int32Array(stop), 0, 1);
  const answers = (await results).map(([sent, received, status]) => ({
    sentMs: Number(sent) / 1e6,
    receivedMs: Number(received) / 1e6,
    status,
  }));
  return { blockedAtMs, resumedAtMs, answers };
}
