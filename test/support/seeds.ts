// Which seeds a seeded test runs, one convention for the whole suite:
//   KPROXY_SEED=n              runs seed n (replays a failure: every message names its seed);
//   KPROXY_SEED=n KPROXY_SEEDS=k   runs the k seeds n, n+1, ... in one process (a sweep);
// with neither, the test's default: a fixed seed, or one from the clock so that runs try new seeds.
// scripts/sweep-seeds.ts sweeps a test file over thousands of seeds, many per process.

/** The seeds to run: from the environment, else `first` (the clock when absent) and `count`. */
export function testSeeds(defaults: { readonly first?: number; readonly count?: number } = {}): number[] {
  const first = Number(process.env.KPROXY_SEED ?? defaults.first ?? Date.now() % 100_000);
  const count = Number(process.env.KPROXY_SEEDS ?? defaults.count ?? 1);
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || count < 1)
    throw new Error(
      `KPROXY_SEED=${process.env.KPROXY_SEED} KPROXY_SEEDS=${process.env.KPROXY_SEEDS}: whole numbers`,
    );
  return Array.from({ length: count }, (_, i) => first + i);
}

/** The line a seeded test prints first, so that any run can be replayed. */
export function seedsLine(what: string, seeds: readonly number[]): string {
  const range = seeds.length === 1 ? `seed ${seeds[0]}` : `seeds ${seeds[0]}..${seeds.at(-1)}`;
  return `# ${what}: ${range} (KPROXY_SEED=${seeds[0]}${seeds.length > 1 ? ` KPROXY_SEEDS=${seeds.length}` : ''} repeats it)\n`;
}
