// The guest's runner of test groups (harness/test-groups.ts): the commands run at once, their lines
// come back prefixed with their number, and the exit status is a failed one's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execa } from 'execa';

const RUNNER = new URL('../../harness/test-groups.ts', import.meta.url).pathname;

test('runs the commands at once, each line prefixed with its number', async () => {
  // The first prints only once the second has begun: one after the other, it would wait for good.
  const marker = `/tmp/kp-test-groups-${process.pid}`;
  const commands = [
    [
      '-e',
      `const fs = require('node:fs'); const poll = setInterval(() => { if (!fs.existsSync('${marker}')) return; clearInterval(poll); console.log('first'); console.error('late'); }, 20)`,
    ],
    ['-e', `require('node:fs').writeFileSync('${marker}', ''); console.log('second\\nmore')`],
  ];
  try {
    const run = await execa(process.execPath, [RUNNER, JSON.stringify(commands)], { timeout: 30_000 });
    assert.deepEqual(run.stdout.split('\n').sort(), ['[1] first', '[1] late', '[2] more', '[2] second']);
  } finally {
    await execa('rm', ['-f', marker]);
  }
});

test('exits with a failed command’s status, after all have ended', async () => {
  const commands = [
    ['-e', 'process.exit(3)'],
    ['-e', 'setTimeout(() => console.log("done"), 300)'],
  ];
  const run = await execa(process.execPath, [RUNNER, JSON.stringify(commands)], {
    reject: false,
    timeout: 30_000,
  });
  assert.equal(run.exitCode, 3);
  assert.match(run.stdout, /^\[2\] done$/m);
  assert.match(run.stdout, /^\[1\] exited with 3$/m);
});
