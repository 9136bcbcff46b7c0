import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { BATCH_BYTES, batchedSink, FLUSH_MS } from '../../src/cli/batched-sink.ts';

function recording() {
  const writes: string[] = [];
  return { writes, sink: { write: (text: string) => writes.push(text) } };
}

test('lines are written together once, the flush interval after the first of them', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { writes, sink } = recording();
  const batched = batchedSink(sink);
  batched.write('one\n');
  t.mock.timers.tick(FLUSH_MS - 1);
  batched.write('two\n');
  assert.equal(writes.length, 0, 'nothing before the interval');
  t.mock.timers.tick(1);
  assert.deepEqual(writes, ['one\ntwo\n']);
  batched.write('three\n');
  t.mock.timers.tick(FLUSH_MS);
  assert.deepEqual(writes, ['one\ntwo\n', 'three\n'], 'a later line starts its own interval');
  t.mock.timers.tick(10 * FLUSH_MS);
  assert.equal(writes.length, 2, 'nothing pending, nothing written');
});

test('a batch that fills its size is written at once; flush writes what is pending', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { writes, sink } = recording();
  const batched = batchedSink(sink);
  const line = `${'x'.repeat(1023)}\n`;
  for (let i = 0; i < BATCH_BYTES / line.length - 1; i++) batched.write(line);
  assert.equal(writes.length, 0);
  batched.write(line);
  assert.equal(writes.length, 1);
  assert.equal(writes[0]!.length, BATCH_BYTES);

  batched.write('last\n');
  batched.flush();
  assert.deepEqual(writes.slice(1), ['last\n']);
  t.mock.timers.tick(FLUSH_MS);
  assert.equal(writes.length, 2, "the flushed batch's timer writes nothing again");
});

test('a pending batch does not keep the process alive', () => {
  const { sink } = recording();
  const unref = mock.method(globalThis, 'setTimeout');
  const batched = batchedSink(sink);
  batched.write('line\n');
  const timer = unref.mock.calls[0]!.result as NodeJS.Timeout;
  assert.equal(timer.hasRef(), false);
  batched.flush();
  unref.mock.restore();
});
