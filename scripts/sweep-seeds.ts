// Sweeps a seeded test file over a range of seeds, many per process (test/support/seeds.ts):
//
//   nice -n 10 node scripts/sweep-seeds.ts <file.test.ts> [--first 1] [--count 2000] [--batch 100] [--name <pattern>]
//
// runs `node --test <file>` with KPROXY_SEED=<batch's first> KPROXY_SEEDS=<batch> for each batch in
// turn (--name: only the tests whose names match, node's --test-name-pattern). A failing batch is run
// again one seed at a time, so that the report names every failing seed, not only the first. Exit 1
// when any seed failed. Kernel tests need root, as under `npm test`.
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    first: { type: 'string', default: '1' },
    count: { type: 'string', default: '2000' },
    batch: { type: 'string', default: '100' },
    name: { type: 'string' },
  },
});
const [file] = positionals;
if (file === undefined || positionals.length > 1) {
  process.stderr.write('usage: sweep-seeds.ts <file.test.ts> [--first N] [--count N] [--batch N] [--name pattern]\n');
  process.exit(2);
}
const first = Number(values.first);
const count = Number(values.count);
const batch = Number(values.batch);

/** Runs the file for `n` seeds from `from`; its output when it failed. */
function run(from: number, n: number): string | undefined {
  const args = ['--test', '--test-reporter=spec', ...(values.name ? [`--test-name-pattern=${values.name}`] : []), file];
  const result = spawnSync(process.execPath, args, {
    env: { ...process.env, KPROXY_SEED: String(from), KPROXY_SEEDS: String(n) },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  return result.status === 0 ? undefined : `${result.stdout}${result.stderr}`;
}

const failed: number[] = [];
const start = Date.now();
for (let from = first; from < first + count; from += batch) {
  const n = Math.min(batch, first + count - from);
  const batchStart = Date.now();
  const output = run(from, n);
  const took = `${((Date.now() - batchStart) / 1000).toFixed(1)} s`;
  if (output === undefined) {
    process.stdout.write(`seeds ${from}..${from + n - 1}: pass (${took})\n`);
    continue;
  }
  process.stdout.write(`seeds ${from}..${from + n - 1}: FAIL (${took})\n${output.slice(-6000)}\n`);
  for (let seed = from; seed < from + n; seed++) {
    if (n > 1 && run(seed, 1) === undefined) continue;
    failed.push(seed);
    process.stdout.write(`seed ${seed}: FAIL (KPROXY_SEED=${seed} node --test ${file})\n`);
  }
}
const minutes = ((Date.now() - start) / 60_000).toFixed(1);
process.stdout.write(
  `${file}: ${count} seeds from ${first} in ${minutes} min: ${failed.length === 0 ? 'none failed' : `FAILED: ${failed.join(', ')}`}\n`,
);
process.exit(failed.length === 0 ? 0 : 1);
