// The daemon's log lines go out together: at most FLUSH_MS after the first of them, or at once when
// they fill BATCH_BYTES. Each write to journald's socket or a pipe is a system call that wakes the
// reader, and in a rollout (a line a sync, ~200 syncs a second) those cost the daemon ~6 % of its
// CPU and ~15 % of its median latency (docs/benchmarks-log.md, "The heap's growth between full
// syncs"). Every line carries its own time; the caller flushes what is pending when it ends, and at
// the process's exit (an exit on an uncaught error included), so only SIGKILL loses lines.
import type { LogSink } from './logger.ts';

export const FLUSH_MS = 20;
export const BATCH_BYTES = 16 * 1024;

export interface BatchedSink extends LogSink {
  /** Writes what is pending now. */
  flush(): void;
}

export function batchedSink(sink: LogSink, flushMs = FLUSH_MS, batchBytes = BATCH_BYTES): BatchedSink {
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (pending === '') return;
    const text = pending;
    pending = '';
    sink.write(text);
  };
  return {
    write(text: string) {
      pending += text;
      if (pending.length >= batchBytes) flush();
      else if (timer === undefined) {
        // Not a reason to stay alive: the exit's flush writes what is left.
        timer = setTimeout(flush, flushMs).unref();
      }
      return true;
    },
    flush,
  };
}
