// Running kproxy's own code inside the throwaway qemu VM of scripts/ipvs-in-qemu.sh, for the modes
// this machine's kernel cannot run (IPVS: many hosts, CI's included, have no ip_vs). The guest's
// userland is this machine's root filesystem (read-only) with the repository at the same path, so
// the same files run there unchanged: the netns lab, a node test file. One boot per call: callers
// run all their VM work in one command (TCG emulation makes a boot cost ~20-40 s).
import { existsSync } from 'node:fs';
import { glob, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { DataplaneMode } from '../contract/dataplane.ts';
import { LIVE_MODES } from '../src/daemon/live-dataplanes.ts';
import { SLOWDOWN } from './emulation.ts';
import type { FileReport } from './test-counts-reporter.ts';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const VM_SCRIPT = join(REPO, 'scripts/ipvs-in-qemu.sh');
/**
 * Set by runNodeTestsInVm for the test files it runs in the VM: the modes they run there (only
 * those the host could not), so the VM does not repeat the host's work.
 */
const MODES_ENV = 'KPROXY_TEST_MODES';
/** Node's compile cache for the guest: in the shared repository, ignored by git (entries are keyed by content). */
const COMPILE_CACHE = join(REPO, '.vm-share/compile-cache');
/** What the guest's node processes load besides the test files: every module of ours outside test/. */
const GUEST_MODULES = '{bin,contract,dataplanes,harness,lab,src}/**/*.ts';
/**
 * kproxy's command and its health listener's thread, each bundled into one file for the guest
 * (buildGuestKproxy). Under TCG a start from the sources resolves, stats and reads each of its
 * modules over 9p and runs the loaders' JavaScript for each: loading `kproxy run`'s modules took
 * 9.5 s of the guest's CPU with the compile cache, 2.8 s as one file; the drift test file (one
 * daemon) 95 s against 58 s, at a host load of ~12.
 * Two levels under the repository as the modules in src/ are, so that the paths they take from
 * import.meta.url (package.json, examples/, the thread's file beside them) are the same.
 */
const GUEST_KPROXY_DIR = join(REPO, '.vm-share/kproxy');
/** The guest's KPROXY_BIN (harness/kproxy-bin.ts). */
const GUEST_KPROXY = join(GUEST_KPROXY_DIR, 'main.mjs');
/**
 * The slowdown the VM's deadlines get (harness/emulation.ts), for a VM of `cpus` vCPUs all busy: the
 * ~7-13× measured with one vCPU, rounded up to cover first starts with a cold compile cache on a
 * machine at the design load, times how much busier than that this host is when the run starts (the
 * emulated CPU gets its share of the host's), times the vCPUs. The VM is one process: beside the
 * suite's other lane (an autogroup of its own, scripts/test.sh) it gets about one of the two cores
 * whatever its vCPU count, so each of n busy vCPUs gets 1/n of what the one vCPU had. It only
 * stretches hang bounds.
 */
function vmSlowdown(cpus: number): number {
  return 15 * SLOWDOWN * cpus;
}

/** Whether this kernel can run `mode`. IPVS needs ip_vs loaded (its /proc file is there then). */
export function kernelRuns(mode: DataplaneMode): boolean {
  return mode !== 'ipvs' || existsSync('/proc/net/ip_vs');
}

/** The modes a kernel test file runs on this kernel: every live one it can, or those the VM harness chose. */
export function modesHere(): DataplaneMode[] {
  const chosen = process.env[MODES_ENV];
  if (chosen !== undefined) return chosen.split(',').filter(Boolean) as DataplaneMode[];
  return LIVE_MODES.filter(kernelRuns);
}

/** The live modes this kernel cannot run, for the VM; none inside the VM harness' own run. */
export function modesForVm(): DataplaneMode[] {
  return process.env[MODES_ENV] === undefined ? LIVE_MODES.filter((m) => !kernelRuns(m)) : [];
}

export interface VmOptions {
  /** Kills the VM after this long. */
  readonly timeoutMs: number;
  /** Environment variables for the command (the guest starts with a bare PATH and HOME). */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the guest's results are written: a directory from vmShareDir(). */
  readonly shareDir?: string;
  /**
   * Virtual CPUs (qemu runs one host thread each, MTTCG); 1 unless the guest runs that many things
   * at once: a second vCPU did not speed up one command's run.
   */
  readonly cpus?: number;
  /** The guest's memory; 2,048 MiB unless set. */
  readonly memoryMiB?: number;
  /** Each piece of the guest's console output as it comes (the command's stdout and stderr). */
  readonly onOutput?: (text: string) => void;
}

export interface VmRun {
  /** The command's exit status; 125 when the guest did not report one (it did not boot, or timed out). */
  readonly exitCode: number;
  /** The guest's console: the command's stdout and stderr interleaved, plus boot messages. */
  readonly output: string;
  readonly durationMs: number;
}

/**
 * A fresh directory the guest can write and the host read: inside the repository (which the VM
 * shares read-write), ignored by git, removed by its user.
 */
export async function vmShareDir(): Promise<string> {
  await mkdir(join(REPO, '.vm-share'), { recursive: true });
  return mkdtemp(join(REPO, '.vm-share', 'run-'));
}

/** Boots the VM, runs `command args` as root in the repository, powers it off. */
export async function runInVm(command: string, args: readonly string[], options: VmOptions): Promise<VmRun> {
  const started = Date.now();
  const shareDir = options.shareDir ?? (await vmShareDir());
  try {
    const env = Object.entries({
      KPROXY_SLOWDOWN: String(vmSlowdown(options.cpus ?? 1)),
      // Node starts slowly under TCG and the labs start many node processes: share a compile cache,
      // kept across boots (a start that strips TypeScript took 2-3× one that finds it cached).
      NODE_COMPILE_CACHE: COMPILE_CACHE,
      ...options.env,
    }).map(([k, v]) => `${k}=${v}`);
    // The script shares its working directory read-write at the same path: the repository, so it
    // is there whatever the checkout's path (the guest's /tmp and /run are its own tmpfs, and a
    // checkout under them would be hidden otherwise) and results come back through vmShareDir().
    const vm = execa(VM_SCRIPT, ['env', '-C', REPO, ...env, command, ...args], {
      cwd: REPO,
      reject: false,
      all: true,
      timeout: options.timeoutMs,
      // The script's own bound (30 min by default) must not cut the caller's shorter or longer one.
      env: {
        IPVS_QEMU_SMP: String(options.cpus ?? 1),
        IPVS_QEMU_MEM: String(options.memoryMiB ?? 2048),
        IPVS_QEMU_TIMEOUT: String(Math.ceil(options.timeoutMs / 1000)),
      },
    });
    if (options.onOutput) vm.all?.on('data', (chunk: Buffer) => options.onOutput?.(chunk.toString()));
    const result = await vm;
    return { exitCode: result.exitCode ?? 125, output: String(result.all), durationMs: Date.now() - started };
  } finally {
    if (options.shareDir === undefined) await rm(shareDir, { recursive: true, force: true });
  }
}

/**
 * Fills the guest's compile cache on the host (harness/warm-compile-cache.ts) with the modules of
 * `files` (test files or globs, relative to the repository) and of GUEST_MODULES, so the guest's
 * first processes do not strip and compile them under TCG: a clean clone has no .vm-share.
 */
async function warmGuestCompileCache(files: readonly string[]): Promise<void> {
  const modules: string[] = [];
  for (const pattern of [GUEST_MODULES, ...files])
    for await (const file of glob(pattern, { cwd: REPO })) modules.push(join(REPO, file));
  await execa(process.execPath, [join(REPO, 'harness/warm-compile-cache.ts'), ...modules], {
    cwd: REPO,
    env: { NODE_COMPILE_CACHE: COMPILE_CACHE },
  });
}

/**
 * Builds GUEST_KPROXY and its thread from the sources and packages (~0.5 s). Left in node_modules:
 * netlink, a native addon, and the parts of undici that src/kube/undici-dispatchers.ts requires file
 * by file at run time (a bundler leaves those as they are).
 */
async function buildGuestKproxy(): Promise<void> {
  // Loaded here: the kernel test files import this module, on the host and in the guest, for modesHere().
  const { build } = await import('esbuild');
  await build({
    entryPoints: [join(REPO, 'src/cli/main.ts'), join(REPO, 'src/daemon/health-listener-thread.ts')],
    outdir: GUEST_KPROXY_DIR,
    outExtension: { '.js': '.mjs' },
    entryNames: '[name]',
    bundle: true,
    external: ['netlink'],
    // The packages' CommonJS, bundled into ESM, requires node's own modules through this (named
    // apart from the createRequire the sources import).
    banner: {
      js: "import { createRequire as requireFor } from 'node:module'; const require = requireFor(import.meta.url);",
    },
    platform: 'node',
    format: 'esm',
    target: 'node24',
    logLevel: 'warning',
  });
}

export interface VmTestRun extends VmRun {
  /** Each test file's outcomes and time, by its absolute path (the same inside the VM); {} when none reported. */
  readonly files: Readonly<Record<string, FileReport>>;
}

export interface VmTestOptions extends VmOptions {
  /** The modes the files run in the VM (they read them with modesHere()). */
  readonly modes?: readonly DataplaneMode[];
}

/** The guest's side of runNodeTestsInVm: runs each group's `node --test` at once. */
const TEST_GROUPS = join(REPO, 'harness/test-groups.ts');
/**
 * The guest's memory for a group of test files: 1 GiB for the node processes of a netns lab or the
 * takeover test (daemons, API server, echo servers, probers, agents: ~50 MB each); the guest's own
 * (kernel, tmpfs, page cache) another 1 GiB.
 */
const MEMORY_PER_GROUP_MIB = 1024;

/**
 * Runs groups of node test files (or globs) in one VM boot: the groups at once, one vCPU each, each
 * group's files one after the other in a `node --test` of its own (harness/test-groups.ts). Files
 * that share the VM's own namespace belong in one group. The counts and time per file come from a
 * report each group writes to a shared file (harness/test-counts-reporter.ts), not from the console.
 */
export async function runNodeTestsInVm(
  groups: readonly (readonly string[])[],
  options: VmTestOptions,
): Promise<VmTestRun> {
  const shareDir = await vmShareDir();
  try {
    // TEST_GROUPS is one of GUEST_MODULES.
    await Promise.all([warmGuestCompileCache(groups.flat()), buildGuestKproxy()]);
    const reports = groups.map((_, i) => join(shareDir, `counts-${i + 1}.json`));
    const commands = groups.map((group, i) => [
      '--test',
      // One at a time within a group: its files share the VM's own namespace, and each file's time is its own.
      '--test-concurrency=1',
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${join(REPO, 'harness/test-counts-reporter.ts')}`,
      `--test-reporter-destination=${reports[i]}`,
      ...group,
    ]);
    const run = await runInVm(process.execPath, [TEST_GROUPS, JSON.stringify(commands)], {
      cpus: groups.length,
      memoryMiB: MEMORY_PER_GROUP_MIB * (1 + groups.length),
      ...options,
      shareDir,
      env: {
        KPROXY_BIN: GUEST_KPROXY,
        ...(options.modes ? { [MODES_ENV]: options.modes.join(',') } : {}),
        ...options.env,
      },
    });
    // Written at the end of each group's run: missing or empty when the VM died or timed out first.
    const files: Record<string, FileReport> = {};
    for (const report of reports)
      Object.assign(files, JSON.parse((await readFile(report, 'utf8').catch(() => '')) || '{}'));
    return { ...run, files };
  } finally {
    await rm(shareDir, { recursive: true, force: true });
  }
}
