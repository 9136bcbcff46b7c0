// The main thread's heartbeat: the one cause of a 503 the health listener's thread judges itself
// (from SharedHealthState), since a main thread that does not run publishes nothing.
//
// The bound is kube-proxy's own rule: it answers /healthz on a goroutine beside its sync loop, and
// turns it 503 once a queued change has waited healthTimeout (2 × syncPeriod) without a sync. A
// main thread that does not run cannot even read the changes waiting on its sockets, let alone sync
// them, so it counts as one with a change queued since it stopped: both endpoints turn 503 once it
// has been silent for that timeout (a stall is a liveness matter, so /livez too). It beats every
// tenth of the timeout, and the thread waits the timeout plus one period after the last beat, so a
// stall shorter than the timeout is never reported; after a stall the overdue interval fires in the
// first timer phase, so the 503 ends with the stall.
import { MAX_TIMER_MS } from '../../contract/base/clock.ts';
import type { SharedHealthState } from './health-shared-state.ts';

const BEATS_PER_TIMEOUT = 10;

function periodMs(timeoutMs: number): number {
  return Math.min(timeoutMs / BEATS_PER_TIMEOUT, MAX_TIMER_MS);
}

/** The heartbeat's age from which the health endpoints answer 503. */
export function stalledAfterMs(timeoutMs: number): number {
  return timeoutMs + periodMs(timeoutMs);
}

/**
 * Beats until the returned function is called. `onStall` hears of each stall the thread may have
 * answered 503 for, once the main thread runs again (the daemon logs it).
 */
export function startHeartbeat(
  state: SharedHealthState,
  timeoutMs: number,
  onStall: (silentMs: number) => void,
): () => void {
  const stalledAfter = stalledAfterMs(timeoutMs);
  state.beat();
  const timer = setInterval(() => {
    const silentMs = state.silentForMs();
    state.beat();
    if (silentMs >= stalledAfter) onStall(silentMs);
  }, periodMs(timeoutMs));
  // It only feeds the health listener, which keeps the process alive itself.
  timer.unref();
  return () => clearInterval(timer);
}
