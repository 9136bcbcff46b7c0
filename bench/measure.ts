// Small measuring helpers shared by the benchmark sections. Wall-clock only: these are figures to
// read and compare as ratios, never assertions.
import { performance } from 'node:perf_hooks';
import type { NftRunner } from '../dataplanes/nftables/nft-runner.ts';
import type { CommandResult, CommandRunner, ScriptInput } from '../dataplanes/shared/command-runner.ts';
import type { NftFamily } from '../dataplanes/shared/nft/transaction.ts';

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

/**
 * Memory after `seconds` of idling and a full collection: what a running daemon holds once V8's
 * memory reducer has returned the pages of a transient peak (right after it, RSS still has them).
 */
export async function idleMemoryMiB(seconds: number): Promise<ReturnType<typeof settledMemoryMiB>> {
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return settledMemoryMiB();
}

export function round(value: number, digits = 1): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** The line a section prints last; bench/main.ts reads it from the child's stdout. */
export function reportSection(figures: Readonly<Record<string, unknown>>): void {
  process.stdout.write(`BENCH-RESULT ${JSON.stringify(figures)}\n`);
}

/** A CommandRunner that adds up the time spent in the tools it runs, to split a sync's time. */
export class TimedRunner implements CommandRunner {
  readonly #inner: CommandRunner;
  ms = 0;
  calls = 0;
  /** Milliseconds per "command first-argument", e.g. "iptables -t". */
  byCommand: Record<string, number> = {};

  constructor(inner: CommandRunner) {
    this.#inner = inner;
  }

  async run(command: string, args: readonly string[], input?: ScriptInput): Promise<CommandResult> {
    const start = performance.now();
    try {
      return await this.#inner.run(command, args, input);
    } finally {
      const ms = performance.now() - start;
      const what = `${command} ${args[0] ?? ''}`.trim();
      this.ms += ms;
      this.calls++;
      this.byCommand[what] = (this.byCommand[what] ?? 0) + ms;
    }
  }

  reset(): void {
    this.ms = 0;
    this.calls = 0;
    this.byCommand = {};
  }
}

/** An NftRunner that adds up the time its transactions take, however they reach nft. */
export class TimedNftRunner implements NftRunner {
  readonly #inner: NftRunner;
  ms = 0;
  calls = 0;

  constructor(inner: NftRunner) {
    this.#inner = inner;
  }

  async run(script: string): Promise<void> {
    const start = performance.now();
    try {
      await this.#inner.run(script);
    } finally {
      this.ms += performance.now() - start;
      this.calls++;
    }
  }

  listChainsJson(family: NftFamily): Promise<unknown> {
    return this.#inner.listChainsJson(family);
  }

  listSetJson(family: NftFamily, name: string): Promise<unknown> {
    return this.#inner.listSetJson(family, name);
  }

  check(script: string): Promise<boolean> {
    return this.#inner.check(script);
  }

  reset(): void {
    this.ms = 0;
    this.calls = 0;
  }
}

/** Elements an nft script adds or deletes: a line each inside a `{` block, or one inline. */
function scriptElements(script: string): number {
  let count = 0;
  for (const line of script.split('\n')) {
    if (line.startsWith('\t')) count++;
    else if (/^(add|delete) element .*\}$/.test(line)) count++;
  }
  return count;
}

/**
 * `inner`, counting the elements of the scripts it runs while `counting` (set around what is
 * counted: splitting a cold start's scripts into lines would add to its time).
 */
export class ElementCountingNftRunner implements NftRunner {
  readonly #inner: NftRunner;
  counting = false;
  elements = 0;

  constructor(inner: NftRunner) {
    this.#inner = inner;
  }

  run(script: string): Promise<void> {
    if (this.counting) this.elements += scriptElements(script);
    return this.#inner.run(script);
  }

  listChainsJson(...args: Parameters<NftRunner['listChainsJson']>): Promise<unknown> {
    return this.#inner.listChainsJson(...args);
  }

  listSetJson(...args: Parameters<NftRunner['listSetJson']>): Promise<unknown> {
    return this.#inner.listSetJson(...args);
  }

  check(script: string): Promise<boolean> {
    return this.#inner.check(script);
  }
}
