// `kproxy cleanup`'s --ipvs-drain-timeout: a Go duration, the bound of IPVS drains (kube-proxy's
// virtual services and kproxy's IPVS mode's), not for --script.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CommandRunner } from '../../dataplanes/shared/command-runner.ts';
import { cleanupCommand } from '../../src/cli/cleanup.ts';
import { captureIO } from './capture-io.ts';

/** Fails every command: a usage error must come before any of them. */
const noCommands: CommandRunner = {
  run: async (command) => assert.fail(`ran ${command}`),
};

test('--ipvs-drain-timeout: refused with --script, negative or not a Go duration', async () => {
  for (const [args, message] of [
    [['--script', '--ipvs-drain-timeout', '30s'], /--script removes at once/],
    [['--kube-proxy', '--ipvs-drain-timeout', '-5s'], /"-5s" is not a duration of 0 or more/],
    [['--kube-proxy', '--ipvs-drain-timeout', '30'], /"30" is not a duration of 0 or more/],
  ] as const) {
    const captured = captureIO();
    assert.equal(await cleanupCommand(args, captured.io, noCommands), 2, args.join(' '));
    assert.match(captured.stderr(), message);
  }
});

test('--help gives the drain, its bound and its default', async () => {
  const captured = captureIO();
  assert.equal(await cleanupCommand(['--help'], captured.io, noCommands), 0);
  assert.match(captured.stdout(), /--ipvs-drain-timeout \(a Go duration; default\n2m0s/);
});
