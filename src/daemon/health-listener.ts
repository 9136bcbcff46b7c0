// The /healthz listener (healthzBindAddress) on a thread of its own. On the main thread a probe
// waits for the turn in progress: at 100,000 services a full sync's slices, the collection of a
// ~160 MiB heap and a loaded machine's scheduling made /healthz p99 0.4–1.9 s (docs/benchmarks.md,
// issue 33), where kube-proxy's Go server answers at once beside a busy sync loop. The thread
// answers from SharedHealthState (what the main thread last published, and its heartbeat) and
// counts in HealthListenerCounts; the main thread only starts, stops and reads it.
//
// The thread is the listener: it failing is the health server failing, and kproxy behaves as
// kube-proxy with --bind-address-hard-fail (always on here): the process exits (onFailure).
import { extname } from 'node:path';
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { HealthListenerCounts } from './health-listener-counts.ts';
import type { SharedHealthState } from './health-shared-state.ts';
import type { HttpListener, Refusal } from './http-listener.ts';

export interface HealthListenerOptions {
  readonly state: SharedHealthState;
  readonly counts: HealthListenerCounts;
  /** The heartbeat's age from which both endpoints answer 503 (health-heartbeat.ts). */
  readonly stalledAfterMs: number;
  /** Sees each refusal, for the debug log (they are counted in `counts` whether or not this is given). */
  readonly onRefused?: (refusal: Refusal) => void;
  /** The thread failed after it started listening (a bug): the listener is gone. */
  readonly onFailure: (error: Error) => void;
}

/** What the thread is given (structured-cloned; the buffers shared). */
export interface HealthListenerData {
  readonly host: string;
  readonly port: number;
  readonly state: SharedArrayBuffer;
  readonly counts: SharedArrayBuffer;
  readonly stalledAfterMs: number;
  readonly logRefusals: boolean;
  /** Requests (answered or refused) between two full collections of the thread's heap. */
  readonly requestsPerCollection: number;
}

/**
 * The thread collects its heap fully every this many requests. Left to V8, probes every 10 ms
 * grew the thread's resident memory 7–11 MiB past what it holds with these collections (the
 * thread alone, 15–25 s of probes): a step when V8 first got to a full collection or an optimizing
 * compilation of its own (its malloced memory read 9.4 MiB, which glibc's thread arena keeps), and
 * each closed connection's native memory waiting for a full collection. A plain one takes ~10–25
 * ms of the thread (docs/benchmarks-log.md, issue 33); a probe every 5 s pays one every ~40 min.
 */
export const REQUESTS_PER_COLLECTION = 500;

/** The thread's first message: whether it listens. */
export type HealthListenerStart =
  | { readonly type: 'listening'; readonly port: number; readonly url: string }
  | { readonly type: 'failed'; readonly code: string };

/** Its later messages. */
export interface HealthListenerRefusal {
  readonly type: 'refused';
  readonly refusal: Refusal;
}

// The thread's module beside this one, in the form this one runs in: .ts in a checkout, .js as
// installed (tsconfig.app.json compiles the tree as it is laid out).
const THREAD = new URL(
  `./health-listener-thread${extname(new URL(import.meta.url).pathname)}`,
  import.meta.url,
);

/** Listens on host:port as listenHttp does (same errors, with their code), from a thread of its own. */
export async function listenHealth(
  host: string,
  port: number,
  options: HealthListenerOptions,
): Promise<HttpListener> {
  const data: HealthListenerData = {
    host,
    port,
    state: options.state.buffer,
    counts: options.counts.buffer,
    stalledAfterMs: options.stalledAfterMs,
    logRefusals: options.onRefused !== undefined,
    requestsPerCollection: REQUESTS_PER_COLLECTION,
  };
  // No execArgv of the process: a preloaded module (a bench's --import) or a profiler flag is
  // meant for the daemon's main thread.
  threadYoungGeneration();
  const worker = new Worker(THREAD, { workerData: data, execArgv: [] });
  // Not events.once: that rejects on an 'error' event, which the start and onFailure handle.
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const first = await new Promise<HealthListenerStart>((resolve, reject) => {
    worker.once('message', (message: HealthListenerStart) => {
      worker.off('error', reject);
      resolve(message);
    });
    worker.once('error', reject);
  });
  if (first.type === 'failed') {
    await exited;
    throw Object.assign(new Error(`cannot listen on ${host}:${port}: ${first.code}`), { code: first.code });
  }
  worker.on('message', (message: HealthListenerRefusal) => options.onRefused?.(message.refusal));
  worker.on('error', options.onFailure);
  return {
    port: first.port,
    url: first.url,
    async close() {
      worker.postMessage('close');
      await exited;
    },
  };
}

/**
 * The thread's young generation at V8's least (1 MiB semi-spaces): it answers probes, a few KiB of
 * garbage each, and the unit's --max-semi-space-size=4, chosen for the main thread's cold start,
 * cost it ~1 MiB of RSS more (docs/benchmarks.md, issue 33). V8 reads the flag when an isolate
 * starts, over a Worker's resourceLimits; the main thread's heap, sized at its own start, does not
 * read it again.
 */
function threadYoungGeneration(): void {
  v8.setFlagsFromString('--max-semi-space-size=1');
}
