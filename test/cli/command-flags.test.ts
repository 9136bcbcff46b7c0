import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commandFlags } from '../../src/cli/command-flags.ts';
import { captureIO } from './capture-io.ts';

const OPTIONS = { help: { type: 'boolean' }, root: { type: 'string' } } as const;

test('a subcommand gets its flag values when they parse', () => {
  const { io, stdout, stderr } = captureIO();
  const flags = commandFlags(io, 'install', ['--root', '/tmp/x'], OPTIONS, 'USAGE\n');
  assert.deepEqual(typeof flags === 'number' ? flags : { ...flags }, { root: '/tmp/x' });
  assert.equal(stdout() + stderr(), '');
});

test('--help prints the usage to stdout and exits 0', () => {
  const { io, stdout, stderr } = captureIO();
  assert.equal(commandFlags(io, 'install', ['--help'], OPTIONS, 'USAGE\n'), 0);
  assert.equal(stdout(), 'USAGE\n');
  assert.equal(stderr(), '');
});

test('an unknown flag is a usage error on stderr naming the command, with exit code 2', () => {
  const { io, stdout, stderr } = captureIO();
  assert.equal(commandFlags(io, 'install', ['--bogus'], OPTIONS, 'USAGE\n'), 2);
  assert.equal(stdout(), '');
  assert.equal(stderr(), 'kproxy install: unknown flag: --bogus\n(see kproxy install --help)\n');
});
