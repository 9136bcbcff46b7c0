// LabProcess.waitFor matches whole lines only: a long-lived process's answers (a prober's
// `{"id":N,...}`) may reach the test in pieces, the marker in the first, the rest in the next.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Lab, requireRoot } from '../../harness/netns.ts';

test('waitFor resolves with the whole line, not the piece that holds the marker', async (t) => {
  if (!requireRoot(t)) return;
  const lab = new Lab('waitfor');
  t.after(() => lab.destroy());
  const ns = await lab.addNetns('a');
  // Two lines, the second written in two pieces 300 ms apart, the last without its newline.
  const script = `printf '{"id":1,"a":1}\\n{"id":2,'; sleep 0.3; printf '"b":2}\\n{"id":3,"c":3}'`;
  const proc = lab.spawn(ns, 'sh', ['-c', script]);
  const [second, first, last] = await Promise.all([
    proc.waitFor('{"id":2,'),
    proc.waitFor('{"id":1,'),
    proc.waitFor('{"id":3,'),
  ]);
  assert.deepEqual(JSON.parse(second), { id: 2, b: 2 });
  assert.deepEqual(JSON.parse(first), { id: 1, a: 1 });
  // Whole once the process closed its output.
  assert.deepEqual(JSON.parse(last), { id: 3, c: 3 });
});
