// A node:test reporter for runs inside the qemu VM (harness/vm.ts): one JSON line at the end,
// the outcome counts of each test file, so the host can check every file ran all its tests (TAP's
// summary only totals the whole run). Suites are not counted, as in node's own summary.
import type { TestEvent } from 'node:test/reporters';

export interface TestCounts {
  pass: number;
  fail: number;
  skipped: number;
  /** Tests marked todo (known bugs pinned), passing or not. */
  todo: number;
}

export default async function* testCountsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const counts: Record<string, TestCounts> = {};
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { data } = event;
    if (data.details.type === 'suite') continue;
    const file = data.file ?? '(unknown file)';
    counts[file] ??= { pass: 0, fail: 0, skipped: 0, todo: 0 };
    const count = counts[file];
    if (data.skip !== undefined) count.skipped++;
    else if (data.todo !== undefined) count.todo++;
    else if (event.type === 'test:pass') count.pass++;
    else count.fail++;
  }
  yield `${JSON.stringify(counts)}\n`;
}
