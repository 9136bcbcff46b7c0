// render --script: the inputs reach their tools byte for byte through a real /bin/sh (nothing in
// them expanded), steps run in order, an empty step runs nothing, and a failed step stops the script.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { printInputs, SCRIPT_PREAMBLE, shellScript, type ToolInput } from '../../contract/tool-inputs.ts';

/** What rule text holds that a shell would expand or end early if it were not quoted. */
const AWKWARD = [
  '-A X -m comment --comment "ns/$HOME:80/TCP `id` $(id) \\\\ \\"q\\"" -j ACCEPT\n',
  "add rule ip kproxy c meta mark set 0x4000 comment 'it''s EOF'\n",
  'EOF\n',
].join('');

test('each input reaches its command unchanged, in order, under its comment line', () => {
  const inputs: ToolInput[] = [
    { title: 'first (cat)', command: 'cat', input: AWKWARD },
    { title: 'lines that are commands', input: 'echo second\n' },
    { command: 'cat', input: 'third\n' },
  ];
  const script = SCRIPT_PREAMBLE + shellScript(inputs);
  assert.equal(execFileSync('sh', ['-c', script], { encoding: 'utf8' }), `${AWKWARD}second\nthird\n`);
  // The same comment lines render prints.
  const comments = (text: string) => text.split('\n').filter((line) => line.startsWith('# '));
  assert.deepEqual(comments(script), comments(printInputs(inputs)));
});

test('a step with nothing to do runs nothing; a failing step stops the script', () => {
  const empty = shellScript([{ title: 'nothing', command: 'false', input: '' }]);
  assert.equal(spawnSync('sh', ['-c', SCRIPT_PREAMBLE + empty]).status, 0);
  const failing = shellScript([{ command: 'false', input: 'x\n' }, { input: 'echo after\n' }]);
  const result = spawnSync('sh', ['-c', SCRIPT_PREAMBLE + failing], { encoding: 'utf8' });
  assert.notEqual(result.status, 0);
  assert.equal(result.stdout, '');
});
