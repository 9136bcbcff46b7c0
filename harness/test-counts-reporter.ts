// A node:test reporter for runs inside the qemu VM (harness/vm.ts): one JSON line at the end,
// the outcome counts of each test file, so the host can check every file ran all its tests (TAP's
// summary only totals the whole run), and how long each file took. Suites are not counted, as in
// node's own summary.
import { resolve } from 'node:path';
import type { TestEvent } from 'node:test/reporters';

export interface TestCounts {
  pass: number;
  fail: number;
  skipped: number;
  /** Tests marked todo (known bugs pinned), passing or not. */
  todo: number;
}

export interface FileReport extends TestCounts {
  /**
   * Wall time from the previous file's last event (the run's start for the first) to this file's
   * last: its process start, module loading and hooks included. Meaningful when the files run one
   * at a time, as each of the VM's groups runs them (a reporter each: harness/vm.ts).
   */
  wallMs: number;
}

export default async function* testCountsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  // Monotonic: the guest's wall clock can be stepped during the run (one file showed 8,581 s of
  // a 2,246 s run).
  const started = performance.now();
  const counts: Record<string, TestCounts> = {};
  /** The time of each file's latest event; the runner's own queueing of the files is not theirs. */
  const lastEvent = new Map<string, number>();
  for await (const event of source) {
    if (event.type === 'test:enqueue' || event.type === 'test:dequeue') continue;
    // A file's console output names it relative to the working directory, its tests absolutely.
    const named = (event.data as { file?: string } | undefined)?.file;
    const file = named === undefined ? undefined : resolve(named);
    if (file !== undefined) {
      lastEvent.delete(file);
      lastEvent.set(file, performance.now());
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { data } = event;
    if (data.details.type === 'suite') continue;
    const key = data.file ?? '(unknown file)';
    counts[key] ??= { pass: 0, fail: 0, skipped: 0, todo: 0 };
    const count = counts[key];
    if (data.skip !== undefined) count.skipped++;
    else if (data.todo !== undefined) count.todo++;
    else if (event.type === 'test:pass') count.pass++;
    else count.fail++;
  }
  const report: Record<string, FileReport> = {};
  let previous = started;
  // Map order is the order of the files' last events (each event moved its file to the end).
  for (const [file, at] of lastEvent) {
    report[file] = { ...(counts[file] ?? { pass: 0, fail: 0, skipped: 0, todo: 0 }), wallMs: at - previous };
    previous = at;
  }
  for (const [file, count] of Object.entries(counts)) report[file] ??= { ...count, wallMs: 0 };
  yield `${JSON.stringify(report)}\n`;
}
