// Connections at a steady pace from the client namespace to fixed targets, for the takeover tests
// (kube-proxy's rules taken over and handed back with none failing). The count follows the clock,
// not the timer: a busy machine delays this process's timers (load 19 on 2 cores gave 12-15 a
// second by ticks at a 40 ms pace), so a late tick sends the ones due. The connections are made
// by the client namespace's prober process as they arrive; the test's end stops the ticks too,
// when an assertion failed first.
import type { TestContext } from 'node:test';
import type { EchoOutcome } from './echo-client.ts';
import type { Topology } from './topology.ts';

export interface ProbeTarget {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  /** TCP unless said. */
  readonly proto?: 'tcp' | 'udp';
}

/** One connection's outcome, and how long its answer took. */
export interface Probe<T extends ProbeTarget> {
  readonly target: T;
  readonly outcome: EchoOutcome;
  readonly ms: number;
}

/**
 * Connections to every target, one per `everyMs` since now, each given `answerMs` (an allowance:
 * harness/emulation.ts), until the returned stop(): their outcomes and the seconds probed.
 */
export function probeUntilStopped<T extends ProbeTarget>(
  t: TestContext,
  topology: Topology,
  targets: readonly T[],
  { everyMs, answerMs }: { readonly everyMs: number; readonly answerMs: number },
): () => Promise<{ probes: Probe<T>[]; seconds: number }> {
  const started = performance.now();
  let sent = 0;
  const pending: Promise<Probe<T>>[] = [];
  const send = () => {
    for (const due = Math.floor((performance.now() - started) / everyMs); sent < due; sent++) {
      for (const target of targets) {
        const at = performance.now();
        pending.push(
          topology
            .connect(topology.client.ns, target.proto ?? 'tcp', target.host, target.port, {
              timeoutMs: answerMs,
            })
            .then(([outcome]) => ({ target, outcome: outcome!, ms: performance.now() - at })),
        );
      }
    }
  };
  const timer = setInterval(send, everyMs);
  t.after(() => clearInterval(timer));
  return async () => {
    send();
    clearInterval(timer);
    return { probes: await Promise.all(pending), seconds: (performance.now() - started) / 1000 };
  };
}
