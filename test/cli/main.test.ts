import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { captureIO } from './capture-io.ts';

test('help (and --help) print the commands and exit 0', async () => {
  for (const argv of [['help'], ['--help'], ['-h']]) {
    const captured = captureIO();
    assert.equal(await main(argv, captured.io), 0);
    assert.match(captured.stdout(), /render/);
    assert.equal(captured.stderr(), '');
  }
});

test('no command prints the usage on stderr and exits 2', async () => {
  const captured = captureIO();
  assert.equal(await main([], captured.io), 2);
  assert.match(captured.stderr(), /Usage: kproxy COMMAND/);
});

test('an unknown command is a usage error naming it', async () => {
  const captured = captureIO();
  assert.equal(await main(['rendr'], captured.io), 2);
  assert.equal(captured.stderr(), 'kproxy: unknown command "rendr" (see kproxy help)\n');
});

test('a command name is not looked up on the prototype', async () => {
  const captured = captureIO();
  assert.equal(await main(['toString'], captured.io), 2);
});

test('version prints the package version', async () => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  const captured = captureIO();
  assert.equal(await main(['version'], captured.io), 0);
  assert.equal(captured.stdout(), `kproxy ${version}\n`);
});
