// The real runner: scripts reach a tool whole, from a private file, and no tool runs for ever.
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { CommandTimeoutError } from '../../../contract/dataplane-error.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';

test("a script is the tool's stdin as a complete private file (mode 0600), already deleted", async () => {
  const script = `${'add element ip kproxy s { 10.0.0.1 }\n'.repeat(5_000)}# the end\n`;
  const result = await execaRunner().run(
    'sh',
    ['-c', 'readlink /proc/self/fd/0; stat -L -c %a /proc/self/fd/0; cat'],
    script,
  );
  const [path, mode, ...rest] = result.stdout.split('\n');
  assert.match(path!, new RegExp(`^${tmpdir()}/kproxy-${process.pid}-[0-9a-f]{16}\\.script \\(deleted\\)$`));
  assert.equal(mode, '600');
  assert.equal(rest.join('\n'), script);
});

test('a script in pieces reaches the tool as the pieces joined, in order; empty pieces are no script', async () => {
  // Pieces as restoreInputSteps makes them: lines, a piece each 1,024, past the size of one write.
  const pieces = Array.from({ length: 40 }, (_, i) =>
    `-A KPROXY-SVC-${i} -j KPROXY-SEP-é${i}\n`.repeat(1024),
  );
  pieces.splice(7, 0, '');
  const result = await execaRunner().run('sh', ['-c', 'readlink /proc/self/fd/0; cat'], pieces);
  const [path, ...rest] = result.stdout.split('\n');
  assert.match(path!, /\.script \(deleted\)$/);
  assert.equal(rest.join('\n'), pieces.join(''));
  assert.equal(
    (await execaRunner().run('sh', ['-c', 'readlink /proc/self/fd/0'], ['', ''])).stdout,
    '/dev/null\n',
  );
});

test('without a script the tool reads an empty stdin', async () => {
  assert.equal((await execaRunner().run('cat', [])).stdout, '');
});

test('a command that does not finish in time is killed and fails with a message naming it and the bound', async () => {
  const runner = execaRunner([], { timeoutMs: (command) => (command === 'sleep' ? 300 : 10_000) });
  const started = Date.now();
  await assert.rejects(runner.run('sleep', ['600']), (error: unknown) => {
    assert.ok(error instanceof CommandTimeoutError);
    assert.equal(error.command, 'sleep');
    assert.equal(error.message, 'sleep 600 did not finish within 0.3 s and was killed');
    return true;
  });
  assert.ok(Date.now() - started >= 300);
  // The runner still works, and a quick command is not affected.
  assert.equal((await runner.run('echo', ['ok'])).stdout, 'ok\n');
});

test('a non-zero exit is returned with its output, not thrown; a tool killed by a signal reports 127', async () => {
  const runner = execaRunner();
  assert.deepEqual(await runner.run('sh', ['-c', 'echo out; echo err >&2; exit 3']), {
    stdout: 'out\n',
    stderr: 'err\n',
    exitCode: 3,
  });
  const killed = await runner.run('sh', ['-c', 'kill -TERM $$']);
  assert.equal(killed.exitCode, 127);
  assert.match(killed.stderr, /killed with SIGTERM/);
});
