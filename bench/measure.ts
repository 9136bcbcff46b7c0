// Small measuring helpers shared by the benchmark sections. Wall-clock only: these are figures to
// read and compare as ratios, never assertions.
import { performance } from 'node:perf_hooks';

/** Milliseconds `fn` took. */
export async function timeMs(fn: () => unknown): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Resident set size after a full collection (when --expose-gc allows one), in MiB. */
export function settledMemoryMiB(): {
  readonly rssMiB: number;
  readonly heapMiB: number;
  readonly externalMiB: number;
} {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const usage = process.memoryUsage();
  return {
    rssMiB: round(usage.rss / 2 ** 20),
    heapMiB: round(usage.heapUsed / 2 ** 20),
    externalMiB: round(usage.external / 2 ** 20),
  };
}

export function round(value: number, digits = 1): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** The line a section prints last; bench/main.ts reads it from the child's stdout. */
export function reportSection(figures: Readonly<Record<string, unknown>>): void {
  process.stdout.write(`BENCH-RESULT ${JSON.stringify(figures)}\n`);
}
