// Preloaded into the daemon by `bench/daemon-memory.ts --turns` (node --import): records the event
// loop's long turns, as the wall time between two ticks of a 2 ms timer and the main thread's own
// CPU time in it, and V8's collections (start, duration, kind), and writes them as JSON to
// $KPROXY_TURNS_OUT when the process exits. A turn long in wall time but short in CPU time is the
// machine's doing (the process was not running, or waited for V8's helper threads); a turn long in
// CPU time is the daemon's own work or a collection's main-thread part.
import { writeFileSync } from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';

/** [start (epoch ms), wall ms, main-thread CPU ms] */
export type Turn = [number, number, number];
/** [start (epoch ms), duration ms, kind (perf_hooks constants.NODE_PERFORMANCE_GC_*)] */
export type Collection = [number, number, number];

const out = process.env.KPROXY_TURNS_OUT;
if (out !== undefined) {
  const turns: Turn[] = [];
  const collections: Collection[] = [];
  const epoch = (at: number) => Math.round(performance.timeOrigin + at);
  const cpuMs = () => {
    const usage = process.threadCpuUsage();
    return (usage.user + usage.system) / 1000;
  };
  let lastWall = performance.now();
  let lastCpu = cpuMs();
  setInterval(() => {
    const wall = performance.now();
    const cpu = cpuMs();
    // Only turns worth a look: the file stays small over minutes of 2 ms ticks.
    if (wall - lastWall > 30 || cpu - lastCpu > 20) {
      turns.push([epoch(lastWall), Math.round(wall - lastWall), Math.round(cpu - lastCpu)]);
    }
    lastWall = wall;
    lastCpu = cpu;
  }, 2).unref();
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0;
      collections.push([epoch(entry.startTime), Math.round(entry.duration * 10) / 10, kind]);
    }
  }).observe({ entryTypes: ['gc'] });
  process.once('exit', () => writeFileSync(out, JSON.stringify({ turns, collections })));
}
