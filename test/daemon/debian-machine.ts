// A Debian root made with mmdebstrap and booted with systemd-nspawn inside a lab network namespace:
// the machinery of the tests that run kproxy under a real systemd as PID 1 (systemd-boot.test.ts,
// the package's deb-package.test.ts). mmdebstrap, not debootstrap: apt fetches and dpkg unpacks in
// batches, where debootstrap runs one download and dpkg call per package (on one busy 2-core
// machine, not side by side: debootstrap 680 s, mmdebstrap 194 s).
import { type ChildProcess, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
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
}

/** Boots `root` in network namespace `netns`; `cleanups` gets its power-off, run before the root is removed. */
export async function boot(cleanups: (() => Promise<void>)[], root: string, netns: string, log: string) {
  const nspawn: ChildProcess = spawn(
    'systemd-nspawn',
    [
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

/** A fresh Debian 12 root at `root` (minutes: ~90 packages downloaded and unpacked); returns the seconds it took. */
export async function makeDebianRoot(root: string): Promise<number> {
  const started = Date.now();
  await execa('mmdebstrap', [
    '--mode=root',
    '--variant=minbase',
    `--include=${PACKAGES.join(',')}`,
    // A throwaway root: no fsync per file unpacked.
    '--dpkgopt=force-unsafe-io',
    'bookworm',
    root,
    MIRROR,
  ]);
  return (Date.now() - started) / 1000;
}
