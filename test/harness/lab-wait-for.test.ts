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

test('waitFor from `since` on finds a marker written after that offset, not one before it', async (t) => {
  if (!requireRoot(t)) return;
  const lab = new Lab('waitsince');
  t.after(() => lab.destroy());
  const ns = await lab.addNetns('a');
  // The same marker twice, the second written once the test asked for it, as a prober answers.
  const script = `printf '{"id":1,"n":1}\\nmark\\n'; read -r _; printf '{"id":1,"n":2}\\n'`;
  const proc = lab.spawn(ns, 'sh', ['-c', script], { stdin: true });
  await proc.waitFor('mark');
  const since = proc.output().length;
  proc.send('go\n');
  assert.deepEqual(JSON.parse(await proc.waitFor('{"id":1,', undefined, since)), { id: 1, n: 2 });
  assert.deepEqual(JSON.parse(await proc.waitFor('{"id":1,')), { id: 1, n: 1 });
});
