// A Debian root made with mmdebstrap (once, then kept: each test boots a copy of its own) and
// booted with systemd-nspawn inside a lab network namespace:
// the machinery of the tests that run kproxy under a real systemd as PID 1 (systemd-boot.test.ts,
// the package's deb-package.test.ts). mmdebstrap, not debootstrap: apt fetches and dpkg unpacks in
// batches, where debootstrap runs one download and dpkg call per package (on one busy 2-core
// machine, not side by side: debootstrap 680 s, mmdebstrap 194 s). Also what these tests and the
// image's (image.test.ts) share around it: the package build, the cache of kept roots (the image
// keeps its base there) and the stand-in API server in the node namespace.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { openSync } from 'node:fs';
import { access, mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { TestPki } from '../../harness/apiserver/certs.ts';
import type { Lab } from '../../harness/netns.ts';
import { objectPath, type ResourceType } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';

/** What a node has besides minbase: systemd, the tools kproxy runs, D-Bus for systemd-analyze. */
const PACKAGES = [
  'systemd',
  'systemd-sysv',
  'dbus', // systemd-analyze security asks the manager over D-Bus
  'iproute2',
  'nftables',
  'iptables',
  'conntrack',
  'ca-certificates',
];
const MIRROR = 'http://deb.debian.org/debian';

/** Booting a minimal Debian to multi-user.target takes ~3 s idle; a busy 2-core machine, more. */
const BOOT_DEADLINE_MS = 120_000;

/** systemd's own stop bound for the container: its units' TimeoutStopSec (kproxy's 30 s) + margin. */
const POWEROFF_DEADLINE_MS = 60_000;

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const API_MAIN = join(REPO, 'harness/apiserver/main.ts');
const API_PORT = 6443;

/** The first sync of one service, plus the unit's start (Node's start-up, the informers' lists). */
const SYNC_DEADLINE_MS = 60_000;

/** The tools these tests need and this machine lacks. */
export async function missingTools(): Promise<string[]> {
  const missing: string[] = [];
  for (const tool of ['mmdebstrap', 'systemd-nspawn']) {
    const found = await execa('sh', ['-c', `command -v ${tool}`], { reject: false });
    if (found.exitCode !== 0) missing.push(tool);
  }
  return missing;
}

/** A booted container: commands run inside it through its PID 1's namespaces. */
export interface Machine {
  run(
    command: string,
    args?: readonly string[],
    reject?: boolean,
  ): Promise<{ stdout: string; exitCode: number }>;
  systemctl(...args: string[]): Promise<string>;
  /** How many times kproxy.service has logged "rules synced", in its journal. */
  syncs(): Promise<number>;
  /** Waits until kproxy.service has synced more than `after` times; fails with its status. */
  syncedAfter(after: number): Promise<void>;
}

/** The stand-in API server as a node's kproxy reaches it, on the node namespace's loopback. */
export interface StandInApi {
  readonly url: string;
  /** POSTs one object to it (curl, inside the node namespace). */
  post(resource: ResourceType, object: Record<string, unknown>): Promise<void>;
}

/**
 * The stand-in API server, a process in network namespace `netns`: plain HTTP, or HTTPS with
 * `pki`'s server certificate, asking for `token` when given.
 */
export async function standInApiServer(
  lab: Lab,
  netns: string,
  options: { readonly pki?: TestPki; readonly token?: string } = {},
): Promise<StandInApi> {
  const { pki, token } = options;
  const serve = [
    ...(pki ? ['--tls-cert', join(pki.dir, 'server.crt'), '--tls-key', join(pki.dir, 'server.key')] : []),
    ...(token ? ['--token', token] : []),
  ];
  const api = lab.spawn(netns, process.execPath, [API_MAIN, '--port', String(API_PORT), ...serve]);
  await api.waitFor('listening');
  const url = `${pki ? 'https' : 'http'}://127.0.0.1:${API_PORT}`;
  const client = [
    ...(pki ? ['--cacert', pki.files.caCert] : []),
    ...(token ? ['-H', `Authorization: Bearer ${token}`] : []),
  ];
  return {
    url,
    async post(resource, object) {
      const meta = object.metadata as { namespace?: string };
      await lab.exec(netns, 'curl', [
        '-sSf',
        ...client,
        '-X',
        'POST',
        '-H',
        'Content-Type: application/json',
        '--data',
        JSON.stringify(object),
        `${url}${objectPath(resource, meta.namespace)}`,
      ]);
    },
  };
}

/** Boots `root` in network namespace `netns`; `cleanups` gets its power-off, run before the root is removed. */
export async function boot(cleanups: (() => Promise<void>)[], root: string, netns: string, log: string) {
  const cgroups = await ownCgroups(`kproxy-${netns}`);
  // nspawn starts in them: it makes its "supervisor" and "payload" cgroups where it starts.
  const joinCgroups = cgroups.map((dir) => `echo $$ > '${dir}/cgroup.procs' && `).join('');
  const nspawn: ChildProcess = spawn(
    'sh',
    [
      '-c',
      `${joinCgroups}exec "$@"`,
      'sh',
      'systemd-nspawn',
      '--directory',
      root,
      '--boot',
      `--network-namespace-path=/run/netns/${netns}`,
      // A node's root has it; nspawn keeps it only for a private network it made itself.
      '--capability=CAP_NET_ADMIN',
      // No systemd on the host to register with or to make a scope: the container is a plain child.
      '--register=no',
      '--keep-unit',
      '--quiet',
    ],
    { stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')] },
  );
  const exited = new Promise<void>((resolve) => nspawn.once('exit', () => resolve()));
  let pid1 = 0;
  cleanups.unshift(async () => {
    // SIGTERM: nspawn asks the container's systemd to power off (SIGRTMIN+3).
    nspawn.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(POWEROFF_DEADLINE_MS).then(() => false)]);
    // Killing the container's PID 1 ends its whole PID namespace.
    if (!done && pid1) process.kill(pid1, 'SIGKILL');
    await exited;
    for (const dir of cgroups) await removeCgroup(dir);
  });
  await eventually(
    'the container’s PID 1',
    async () => {
      const children = await readFile(`/proc/${nspawn.pid}/task/${nspawn.pid}/children`, 'utf8').catch(
        () => '',
      );
      pid1 = Number(children.trim().split(' ')[0] || 0);
      // nspawn's first child sets up the namespaces and forks the container's PID 1: systemd.
      const comm = pid1 ? await readFile(`/proc/${pid1}/comm`, 'utf8').catch(() => '') : '';
      return comm.trim() === 'systemd';
    },
    BOOT_DEADLINE_MS,
  );
  const machine: Machine = {
    async run(command, args = [], reject = true) {
      const result = await execa(
        'nsenter',
        ['-t', String(pid1), '-a', 'env', '-i', 'PATH=/usr/sbin:/usr/bin', command, ...args],
        { reject: false },
      );
      if (reject && result.exitCode !== 0) {
        throw new Error(`${command} ${args.join(' ')} (in the container): ${result.stderr}${result.stdout}`);
      }
      return { stdout: result.stdout, exitCode: result.exitCode ?? -1 };
    },
    async systemctl(...args) {
      return (await machine.run('systemctl', args)).stdout.trim();
    },
    async syncs() {
      const journal = await machine.run('journalctl', ['-u', 'kproxy', '-o', 'cat']);
      return journal.stdout.split('"rules synced"').length - 1;
    },
    async syncedAfter(after) {
      await eventually(
        'rules synced by the service',
        async () => (await machine.syncs()) > after,
        SYNC_DEADLINE_MS,
      ).catch(async (error: Error) => {
        const status = await machine.run('systemctl', ['status', '--no-pager', '-n', '30', 'kproxy'], false);
        throw new Error(`${error.message}\n${status.stdout}`);
      });
    },
  };
  await eventually(
    'the container’s systemd reaches multi-user.target',
    async () => {
      const state = await machine.run('systemctl', ['is-active', 'multi-user.target'], false);
      return state.stdout.trim() === 'active';
    },
    BOOT_DEADLINE_MS,
  );
  return machine;
}

/**
 * `npm run package` into `dir` (--fast: gzip, no tarball; the same tree as the release build's
 * xz); returns the .deb's path. `test` names the test in the sizes it logs.
 */
export async function buildPackage(dir: string, test: string): Promise<string> {
  const result = await execa(join(REPO, 'scripts/package.sh'), [dir, '--fast'], { cwd: REPO });
  process.stderr.write(`${test}: ${result.stdout.replaceAll('\n', '; ')}\n`);
  const { version } = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string };
  const deb = join(dir, `kproxy_${version}_amd64.deb`);
  await access(deb);
  return deb;
}

/**
 * A cgroup of the container's own, `name` under this process's, in each hierarchy systemd places
 * units in: cgroup v2's and, on a hybrid or legacy host (this one), v1's name=systemd. Without it,
 * nspawn (no host systemd to register with) puts every container in <this cgroup>/payload, and
 * two booted at once (the test script runs these tests side by side) share their units' cgroups:
 * one's systemd removing kproxy.service's cgroup at a stop or restart fails the other's start of
 * it ("Control process exited, code=exited, status=219/CGROUP"; the deb test's upgrade saw it as
 * "the control process exited with error code" while the systemd-boot test restarted kproxy).
 */
async function ownCgroups(name: string): Promise<string[]> {
  const memberships = (await readFile('/proc/self/cgroup', 'utf8')).split('\n');
  const dirs: string[] = [];
  for (const line of (await readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
    // "<id> <parent> <dev> <root> <mount point> <options> ... - <type> <source> <super options>"
    const [mount, filesystem] = line.split(' - ');
    const [, , , mountRoot, mountPoint] = mount?.split(' ') ?? [];
    const [type, , options] = filesystem?.split(' ') ?? [];
    if (mountRoot === undefined || mountPoint === undefined) continue;
    // /proc/self/cgroup: "0::<path>" for v2, "<id>:name=systemd:<path>" for v1's.
    const controller =
      type === 'cgroup2'
        ? ''
        : type === 'cgroup' && options?.split(',').includes('name=systemd')
          ? 'name=systemd'
          : undefined;
    const membership = memberships.find((entry) => entry.split(':')[1] === controller);
    if (controller === undefined || membership === undefined) continue;
    const path = membership.split(':').slice(2).join(':');
    const dir = join(mountPoint, relative(mountRoot, path), name);
    await mkdir(dir);
    dirs.push(dir);
  }
  return dirs;
}

/** Removes a cgroup the container has left, and the ones nspawn and its systemd made in it. */
async function removeCgroup(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) await removeCgroup(join(dir, entry.name));
  }
  await rmdir(dir);
}

/**
 * Where made roots are kept between runs, one directory per kind, one root per recipe in it (as
 * scripts/ipvs-in-qemu.sh keeps its initrd): systemd-boot and deb-package start at once, and each
 * root made by mmdebstrap cost ~180 s of the suite's busiest minutes; the image's base as much.
 */
const ROOT_CACHE = '/var/cache/kproxy-test';
/** A kept root older than this is made again, so the tests meet bookworm's updates within a week. */
const ROOT_MAX_AGE_DAYS = 7;
const MMDEBSTRAP_ARGS = [
  '--mode=root',
  '--variant=minbase',
  `--include=${PACKAGES.join(',')}`,
  // A throwaway root: no fsync per file unpacked.
  '--dpkgopt=force-unsafe-io',
  'bookworm',
];
/**
 * Run under the kept root's lock, with the command that makes it (its first `n` arguments) and the
 * one that uses it (the rest): the first caller to find no fresh kept root makes one (under a
 * temporary name, renamed when whole; its output to stderr, the use's stdout is the caller's);
 * each then uses it. The use is under the lock too, so a stale root is never replaced under a reader.
 */
const WITH_KEPT = `set -e; kept=$1 days=$2 n=$3; shift 3
if [ -z "$(find "$kept" -maxdepth 0 -mtime -"$days" 2>/dev/null)" ]; then
  rm -rf "$kept" "$kept.new"
  "\${@:1:n}" >&2
  mv "$kept.new" "$kept"
fi
exec "\${@:n+1}"`;

/**
 * Runs `use(kept)` with the root of `kind` kept for `recipe` (anything that changes the root made:
 * its hash names it), made first by `make(target)` when missing or a week old; returns the use's
 * result. The use must not change the kept root: it copies it.
 */
export async function withKeptRoot(
  kind: string,
  recipe: unknown,
  make: (target: string) => readonly string[],
  use: (kept: string) => readonly string[],
) {
  const key = createHash('sha256').update(JSON.stringify(recipe)).digest('hex');
  const kept = join(ROOT_CACHE, kind, key.slice(0, 12));
  await mkdir(join(ROOT_CACHE, kind), { recursive: true });
  const making = make(`${kept}.new`);
  const args = [kept, String(ROOT_MAX_AGE_DAYS), String(making.length), ...making, ...use(kept)];
  return await execa('flock', [`${kept}.lock`, 'bash', '-c', WITH_KEPT, 'bash', ...args]);
}

/**
 * A fresh Debian 12 root at `root`: a copy of the kept one (~90 packages; made first when missing
 * or stale, minutes), so every caller boots a pristine root; returns the seconds it took.
 */
export async function makeDebianRoot(root: string): Promise<number> {
  const started = Date.now();
  await withKeptRoot(
    'debian-root',
    [MMDEBSTRAP_ARGS, MIRROR],
    (target) => ['mmdebstrap', ...MMDEBSTRAP_ARGS, target, MIRROR],
    (kept) => ['cp', '-a', '--reflink=auto', kept, root],
  );
  return (Date.now() - started) / 1000;
}
