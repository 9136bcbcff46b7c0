import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { loadProxyConfig } from '../../src/cli/config.ts';
import { APP_DIR, COMMAND_PATH, CONFIG_PATH, installCommand, UNIT_PATH } from '../../src/cli/install.ts';

const run = promisify(execFile);

function capture() {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    stdin: (async function* () {})(),
  };
  return { io, out: () => stdout, err: () => stderr };
}

describe('kproxy install --root', () => {
  test('lays out a self-contained app, command, unit and default config that loads', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'kproxy-install-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const { io, out, err } = capture();
    assert.equal(await installCommand(['--root', root], io), 0, err());
    assert.match(out(), /installed the app in /);

    const app = join(root, APP_DIR);
    for (const path of [
      'bin/kproxy.js',
      'src/cli/main.js',
      'dataplanes/shared/dataplane.js',
      'examples/cluster.yaml',
      'node_modules/pino/package.json',
    ]) {
      await access(join(app, path));
    }
    await assert.rejects(access(join(app, 'src/cli/main.ts')), 'the app is installed as JavaScript');
    await assert.rejects(access(join(app, 'test')), 'tests are not installed');
    await assert.rejects(access(join(app, 'node_modules/typescript')), 'dev dependencies are not installed');

    // The installed app runs on its own, with its bundled Node, from outside the checkout.
    const node = join(app, 'node_modules/node/bin/node');
    const version = await run(node, [join(app, 'bin/kproxy.js'), 'version'], { cwd: root });
    assert.match(version.stdout, /^kproxy \d+\.\d+\.\d+/);
    // Its files are read relative to the code, as in the checkout: the bundled example renders.
    const rendered = await run(node, [join(app, 'bin/kproxy.js'), 'render', '--example'], { cwd: root });
    assert.match(rendered.stdout, /table ip kproxy/);

    const command = await readFile(join(root, COMMAND_PATH), 'utf8');
    assert.match(command, /^#!\/bin\/sh\n/);
    assert.match(
      command,
      new RegExp(`exec ${APP_DIR}/node_modules/node/bin/node ${APP_DIR}/bin/kproxy.js "\\$@"`),
    );
    assert.equal((await stat(join(root, COMMAND_PATH))).mode & 0o777, 0o755);

    const unit = await readFile(join(root, UNIT_PATH), 'utf8');
    assert.match(unit, new RegExp(`run --config ${CONFIG_PATH}$`, 'm'));

    const configText = await readFile(join(root, CONFIG_PATH), 'utf8');
    const loaded = await loadProxyConfig(
      { config: CONFIG_PATH },
      { readFile: async () => configText, hostname: 'node-1' },
    );
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.error);
    assert.equal(loaded.config.mode, 'nftables');
  });

  test('a second install keeps the operator’s configuration', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'kproxy-install-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    assert.equal(await installCommand(['--root', root], capture().io), 0);
    await writeFile(join(root, CONFIG_PATH), '# edited by the operator\n');
    const second = capture();
    assert.equal(await installCommand(['--root', root], second.io), 0);
    assert.match(second.out(), /kept the existing .*config\.yaml/);
    assert.equal(await readFile(join(root, CONFIG_PATH), 'utf8'), '# edited by the operator\n');
  });

  test('an unknown flag is a usage error', async () => {
    const { io, err } = capture();
    assert.equal(await installCommand(['--rooot', '/tmp/x'], io), 2);
    assert.match(err(), /kproxy install: Unknown option '--rooot'/);
  });
});
