// The configuration warnings `kproxy run` logs at start (flags without effect or ignored beside
// --config, the file's inert fields, kube-proxy's lenient decoding) are printed by render, trace
// and diff on stderr, word for word and in run's order, so a config can be checked without run.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { CommandRunner } from '../../dataplanes/shared/command-runner.ts';
import { diffCommand } from '../../src/cli/diff.ts';
import { main } from '../../src/cli/main.ts';
import { type RunEnvironment, runCommand } from '../../src/cli/run.ts';
import { EXAMPLE_CONFIG_PATH } from '../../src/sources/example-cluster.ts';
import { captureIO } from './capture-io.ts';

/** --write-config-to ends run before it touches the node: any use of the environment fails. */
const untouchable = new Proxy({} as RunEnvironment, {
  get: (_target, key) => {
    throw new Error(`run used its environment (${String(key)}) before exiting`);
  },
});

async function command(argv: string[]) {
  const captured = captureIO();
  const code = await main(argv, captured.io);
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}

/** The messages of run's warning lines (klog text: severity W, then the quoted message). */
async function runWarnings(args: string[], dir: string): Promise<string[]> {
  const { io, stdout, stderr } = captureIO();
  const code = await runCommand([...args, `--write-config-to=${join(dir, 'written.yaml')}`], io, untouchable);
  assert.equal(code, 0, stderr());
  return [...stdout().matchAll(/^W[^\]\n]*\] ("(?:[^"\\\n]|\\.)*")/gm)].map(
    (match) => JSON.parse(match[1]!) as string,
  );
}

const printed = (stderr: string) =>
  stderr
    .split('\n')
    .filter((line) => line.startsWith('warning: '))
    .map((line) => line.slice('warning: '.length));

test("render, trace and diff print run's configuration warnings in run's words and order", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-config-warnings-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // The example node's configuration, as kind writes its own: with metadata (lenient decoding) and
  // a field that does nothing here.
  const config = join(dir, 'config.yaml');
  await writeFile(
    config,
    `${await readFile(EXAMPLE_CONFIG_PATH, 'utf8')}metadata:\n  name: config\nconfigSyncPeriod: 10m\n`,
  );
  const flags = ['--config', config, '--profiling=true', '--cluster-cidr=10.99.0.0/16', '--alsologtostderr'];
  const expected = await runWarnings(flags, dir);
  assert.equal(expected.length, 5, expected.join('\n'));
  assert.match(expected.join('\n'), /--cluster-cidr is ignored: --config is given/);
  assert.match(expected.join('\n'), /config\.yaml: using lenient decoding .*unknown field "metadata"/);

  const render = await command(['render', '--example', ...flags]);
  assert.equal(render.code, 0, render.stderr);
  assert.deepEqual(printed(render.stderr), expected);
  // The ignored --cluster-cidr is ignored in the render too: the rules are those of the file alone.
  const fileOnly = await command(['render', '--example', '--config', config]);
  assert.equal(render.stdout, fileOnly.stdout);
  assert.doesNotMatch(render.stdout, /10\.99\.0\.0/);

  const trace = await command([
    'trace',
    '--example',
    ...flags,
    '--from',
    '10.244.1.5',
    '--to',
    '10.96.0.10:53/udp',
  ]);
  assert.equal(trace.code, 0, trace.stderr);
  assert.deepEqual(printed(trace.stderr), expected);

  // diff prints them before it reads the kernel (here a runner that has none: diff then fails).
  const captured = captureIO();
  const noKernel: CommandRunner = {
    run: async (name) => {
      throw new Error(`no ${name} in this test`);
    },
  };
  assert.equal(await diffCommand(['--example', ...flags], captured.io, { runner: noKernel }), 2);
  assert.deepEqual(printed(captured.stderr()), expected);

  // --strict counts them as it counts the objects' warnings.
  const strict = await command(['render', '--example', '--strict', ...flags]);
  assert.equal(strict.code, 1);
  assert.equal(strict.stdout, '');
});

test('without --config, the flags apply over --example’s configuration, and no-effect flags warn', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-config-warnings-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const flags = ['--profiling=true', '--feature-gates=NFTablesNetlink=true'];
  const expected = await runWarnings(flags, dir);
  assert.equal(expected.length, 2, expected.join('\n'));
  const render = await command(['render', '--example', ...flags, '--cluster-cidr=10.99.0.0/16']);
  assert.equal(render.code, 0, render.stderr);
  assert.deepEqual(printed(render.stderr), expected);
  assert.match(render.stdout, /10\.99\.0\.0\/16/, '--cluster-cidr over the example configuration');
});
