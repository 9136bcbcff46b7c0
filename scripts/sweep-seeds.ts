// Sweeps a seeded test file over a range of seeds, many per process (test/support/seeds.ts):
//
//   nice -n 10 node scripts/sweep-seeds.ts <file.test.ts> [--first 1] [--count 2000] [--batch 100] [--jobs 1] [--name <pattern>]
//
// runs `node --test <file>` with KPROXY_SEED=<batch's first> KPROXY_SEEDS=<batch> for each batch,
// --jobs batches at once (more than the cores only pays for tests that mostly wait on clocks; kernel
// tests may run side by side: harness/netns.ts names every namespace after its process). --name: only
// the tests whose names match, node's --test-name-pattern. A failing batch is run again one seed at a
// time, so that the report names every failing seed, not only the first; a failing run's whole
// output is kept in the temporary directory. Exit 1 when any seed failed. Kernel tests need root,
// as under `npm test`.
//
// Each run gets a session of its own whose scheduling autogroup gets this process's nice: with
// sched_autogroup (most distributions' kernels) the CPU is shared between sessions first, so a
// `nice -n 10` run in the terminal's session would otherwise still take a full session's share
// from a test run in another terminal, whatever its own nice.
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { getPriority, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    first: { type: 'string', default: '1' },
    count: { type: 'string', default: '2000' },
    batch: { type: 'string', default: '100' },
    jobs: { type: 'string', default: '1' },
    name: { type: 'string' },
  },
});
const [first, count, batch, jobs] = [values.first, values.count, values.batch, values.jobs].map(Number) as [
  number,
  number,
  number,
  number,
];
if (
  positionals.length !== 1 ||
  !Number.isSafeInteger(first) ||
  ![count, batch, jobs].every((n) => Number.isSafeInteger(n) && n >= 1)
) {
  process.stderr.write(
    'usage: sweep-seeds.ts <file.test.ts> [--first N] [--count N] [--batch N] [--jobs N] [--name pattern]\n',
  );
  process.exit(2);
}
const file = positionals[0]!;

/** The runs under way: their sessions are their own, so a signal to this one must be passed on. */
const running = new Set<ChildProcess>();
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
  process.on(signal, () => {
    for (const child of running) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Its session ended between its exit and its close event.
      }
    }
    process.exit(130);
  });

/** Runs the file for `n` seeds from `from`; its output when it failed. */
function run(from: number, n: number): Promise<string | undefined> {
  const args = [
    '--test',
    '--test-reporter=spec',
    ...(values.name ? [`--test-name-pattern=${values.name}`] : []),
    file,
  ];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, KPROXY_SEED: String(from), KPROXY_SEEDS: String(n) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  running.add(child);
  child.on('close', () => running.delete(child));
  // No autogroup (a kernel without it, or a container's read-only /proc): the process nice alone.
  if (child.pid !== undefined)
    writeFile(`/proc/${child.pid}/autogroup`, String(getPriority())).catch(() => undefined);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (output += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (output += text));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => resolve(status === 0 ? undefined : output));
  });
}

/** Keeps a failing run's whole output (a large assertion diff leaves only its tail in the report). */
async function keep(from: number, n: number, output: string): Promise<string> {
  const saved = join(tmpdir(), `sweep-${basename(file)}-${from}-${n}.log`);
  await writeFile(saved, output);
  return saved;
}

/** Sweeps one batch; the seeds that failed in it. */
async function sweep(from: number, n: number): Promise<number[]> {
  const batchStart = Date.now();
  const output = await run(from, n);
  const took = `${((Date.now() - batchStart) / 1000).toFixed(1)} s`;
  if (output === undefined) {
    process.stdout.write(`seeds ${from}..${from + n - 1}: pass (${took})\n`);
    return [];
  }
  const saved = await keep(from, n, output);
  process.stdout.write(`seeds ${from}..${from + n - 1}: FAIL (${took}; ${saved})\n${output.slice(-6000)}\n`);
  const failed: number[] = [];
  for (let seed = from; seed < from + n; seed++) {
    const alone = n > 1 ? await run(seed, 1) : output;
    if (alone === undefined) continue;
    failed.push(seed);
    const where = n > 1 ? await keep(seed, 1, alone) : saved;
    process.stdout.write(`seed ${seed}: FAIL (KPROXY_SEED=${seed} node --test ${file}; ${where})\n`);
  }
  return failed;
}

const batches: [number, number][] = [];
for (let from = first; from < first + count; from += batch)
  batches.push([from, Math.min(batch, first + count - from)]);
const start = Date.now();
const failed: number[] = [];
// Each worker takes the next batch when its own is done.
await Promise.all(
  Array.from({ length: jobs }, async () => {
    for (let next = batches.shift(); next !== undefined; next = batches.shift())
      failed.push(...(await sweep(...next)));
  }),
);
failed.sort((a, b) => a - b);
const minutes = ((Date.now() - start) / 60_000).toFixed(1);
process.stdout.write(
  `${file}: ${count} seeds from ${first} in ${minutes} min: ${failed.length === 0 ? 'none failed' : `FAILED: ${failed.join(', ')}`}\n`,
);
process.exit(failed.length === 0 ? 0 : 1);
