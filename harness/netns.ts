// Throwaway network namespaces for kernel tests.
//
// A Lab records every namespace and process it creates and removes them by name/PID in destroy(),
// also when the test process exits or is interrupted. Everything happens inside namespaces named
// `kp<pid>-<tag>-<name>`; nothing here touches the host's own namespace (links are created from
// inside a lab namespace, sysctls are written inside one and limited to per-namespace `net.` keys).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { execa } from 'execa';
import { CommandTimeoutError } from '../contract/dataplane-error.ts';
import {
  type CommandRunner,
  commandTimeoutMs,
  execaRunner,
  scriptText,
} from '../dataplanes/shared/command-runner.ts';
import { allowance } from './emulation.ts';
import { NamespaceShell } from './namespace-shell.ts';

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

export interface ExecOptions {
  /** Written to the command's stdin. */
  readonly input?: string;
  /** Throw on a non-zero exit (default true). */
  readonly reject?: boolean;
  readonly timeoutMs?: number;
}

/** How a process ended: an exit code, or the signal that killed it. */
export interface ProcessEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A long-running process inside a namespace. */
export interface LabProcess {
  readonly pid: number;
  /**
   * Resolves with the first stdout line that contains `marker` (e.g. "ready"), looking from offset
   * `since` of output() on (its length before a request whose answer cannot come earlier).
   */
  waitFor(marker: string, timeoutMs?: number, since?: number): Promise<string>;
  /** Everything written to stdout so far (all of it once stop() or kill() resolved). */
  output(): string;
  /** Writes to its stdin (spawned with `{ stdin: true }`). */
  send(text: string): void;
  /**
   * A clean stop the test relies on: SIGTERM, then waits up to `withinMs` for the process to exit.
   * Resolves with how it ended; throws (after a SIGKILL) when it did not stop in time.
   */
  stop(withinMs: number): Promise<ProcessEnd>;
  /** Cleanup: SIGTERM, and SIGKILL after KILL_GRACE_MS. */
  kill(): Promise<void>;
}

/**
 * How long kill() lets a process handle SIGTERM before it is killed. Only cleanup waits on it
 * (echo servers, clients, the stand-in API server exit at once); a test that needs a clean stop
 * uses stop() with the bound of the process it stops.
 */
export const KILL_GRACE_MS = 2_000;

/**
 * waitFor's default: a Node process in a namespace printing its first line (e.g. "ready"): 0.2-0.6 s
 * of CPU measured (the echo client up to the stand-in API server), so up to ~3 s at the design load
 * (harness/emulation.ts); the deadline bounds a hang, stretched by the one factor.
 */
export const START_DEADLINE_MS = allowance(10_000);

/** True when the test may touch the kernel; otherwise skips the test LOUDLY with the reason. */
export function requireRoot(t: TestContext, what = 'network namespaces'): boolean {
  if (process.getuid?.() === 0) return true;
  const reason = `needs root: ${what} (run the suite as root to include this kernel test)`;
  process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
  t.skip(reason);
  return false;
}

const liveLabs = new Set<Lab>();
const usedTags = new Set<string>();
let exitHooked = false;

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  // Synchronous last resort: the event loop is gone at 'exit'.
  process.on('exit', () => {
    for (const lab of liveLabs) lab.destroySync();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const lab of liveLabs) lab.destroySync();
      process.exit(130);
    });
  }
}

const NAME = /^[a-z0-9][a-z0-9-]*$/;

/**
 * The environment of what a lab runs: the test's, with Node's compile cache (as in the qemu VM,
 * harness/vm.ts) unless the caller chose one. Many kernel tests start Node programs in namespaces
 * (echo servers, probers, netlink mains), several a seed: loading their modules took ~0.39 s of
 * CPU each, ~0.15 s from the cache (measured, dataplanes/ipvs/companion-ruleset.ts's imports).
 */
const LAB_ENV = {
  ...process.env,
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'kproxy-lab-compile-cache'),
};

export class Lab {
  readonly tag: string;
  readonly #namespaces: string[] = [];
  readonly #processes = new Map<number, ChildProcess>();
  /** Each namespace's shell (exec, runner), started at the first command; killed with the processes. */
  readonly #shells = new Map<string, NamespaceShell>();

  /** `tag` must be unique in this process; it keeps parallel labs apart. */
  constructor(tag: string) {
    if (!NAME.test(tag)) throw new Error(`lab tag ${JSON.stringify(tag)}: use [a-z0-9-]`);
    if (usedTags.has(tag)) throw new Error(`lab tag ${tag} already used in this process`);
    usedTags.add(tag);
    this.tag = tag;
    hookExit();
    liveLabs.add(this);
  }

  /** The full namespace name for a short name. */
  nsName(name: string): string {
    return `kp${process.pid}-${this.tag}-${name}`;
  }

  /** Creates a namespace with loopback up; returns its full name. */
  async addNetns(name: string): Promise<string> {
    if (!NAME.test(name)) throw new Error(`netns name ${JSON.stringify(name)}: use [a-z0-9-]`);
    const ns = this.nsName(name);
    await execa('ip', ['netns', 'add', ns]);
    this.#namespaces.push(ns);
    await this.ip(ns, ['link', 'set', 'lo', 'up']);
    // No duplicate address detection: links created later are usable at once (no tentative
    // link-local address delaying the first IPv6 packets by a second).
    await this.exec(ns, 'sysctl', [
      '-q',
      '-w',
      'net.ipv6.conf.default.accept_dad=0',
      'net.ipv6.conf.all.accept_dad=0',
    ]);
    return ns;
  }

  /** `ip ARGS` in the namespace (as `ip -n ns ARGS`), through its shell. */
  async ip(ns: string, args: readonly string[]): Promise<void> {
    await this.exec(ns, 'ip', args);
  }

  /** A veth pair between two lab namespaces (created from inside nsA), both ends up. */
  async addVeth(nsA: string, ifA: string, nsB: string, ifB: string): Promise<void> {
    this.#own(nsB);
    await this.ip(nsA, ['link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB, 'netns', nsB]);
    await this.ip(nsA, ['link', 'set', ifA, 'up']);
    await this.ip(nsB, ['link', 'set', ifB, 'up']);
  }

  async addBridge(ns: string, bridge: string): Promise<void> {
    await this.ip(ns, ['link', 'add', bridge, 'type', 'bridge']);
    await this.ip(ns, ['link', 'set', bridge, 'up']);
  }

  async setMaster(ns: string, ifname: string, bridge: string): Promise<void> {
    await this.ip(ns, ['link', 'set', ifname, 'master', bridge]);
  }

  /** `cidr` like 10.0.0.1/24 or fd00::1/64. IPv6 addresses skip DAD so they work at once. */
  async addAddress(ns: string, ifname: string, cidr: string): Promise<void> {
    const extra = cidr.includes(':') ? ['nodad'] : [];
    await this.ip(ns, ['addr', 'add', cidr, 'dev', ifname, ...extra]);
  }

  /** `ip route add ROUTE...`, e.g. ['default', 'via', '10.0.0.1'] or ['10.96.0.0/12', 'dev', 'eth0']. */
  async addRoute(ns: string, route: readonly string[]): Promise<void> {
    const family = route.some((r) => r.includes(':')) ? ['-6'] : [];
    await this.ip(ns, [...family, 'route', 'add', ...route]);
  }

  /** A per-namespace sysctl (net.* only: other keys are host-wide). */
  async sysctl(ns: string, key: string, value: string): Promise<void> {
    if (!key.startsWith('net.')) throw new Error(`sysctl ${key} is not per-namespace`);
    await this.exec(ns, 'sysctl', ['-q', '-w', `${key}=${value}`]);
  }

  /**
   * Runs a command inside a namespace and waits for it (through the namespace's shell, see
   * NamespaceShell). A command still running after `timeoutMs` is killed: it rejects, or with
   * `reject: false` resolves with exit code -1.
   */
  async exec(
    ns: string,
    cmd: string,
    args: readonly string[],
    options: ExecOptions = {},
  ): Promise<ExecResult> {
    const result = await this.#shell(ns).run(cmd, args, options.input ?? '', options.timeoutMs);
    const failed = result.timedOut || result.exitCode !== 0;
    if (failed && (options.reject ?? true)) {
      const how = result.timedOut ? `timed out after ${options.timeoutMs} ms` : `exited ${result.exitCode}`;
      throw new Error(`${[cmd, ...args].join(' ')} in ${ns} ${how}: ${result.stderr.trim()}`);
    }
    // As execa's default (what this used before): without the final newline.
    const strip = (text: string) => text.replace(/\r?\n$/, '');
    return {
      stdout: strip(result.stdout),
      stderr: strip(result.stderr),
      exitCode: result.timedOut ? -1 : result.exitCode,
    };
  }

  /**
   * The product's CommandRunner for a namespace, through the namespace's shell: what execaRunner
   * with the prefix `ip netns exec NS` runs, at a few milliseconds a command rather than tens (no
   * fork of the test's large Node process, no setpriv, no `ip netns exec` per command). Each
   * command has the product's timeout (commandTimeoutMs) and fails with CommandTimeoutError like
   * execaRunner's. spawn() (`nft -i`) goes through `ip netns exec` as execaRunner's does.
   */
  runner(ns: string): CommandRunner {
    const shell = this.#shell(ns);
    return {
      async run(command, args, input) {
        const timeoutMs = commandTimeoutMs(command);
        const result = await shell.run(command, args, scriptText(input), timeoutMs);
        if (result.timedOut) throw new CommandTimeoutError(command, timeoutMs, [command, ...args].join(' '));
        return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode };
      },
      spawn: execaRunner(['ip', 'netns', 'exec', ns]).spawn,
    };
  }

  #shell(ns: string): NamespaceShell {
    this.#own(ns);
    let shell = this.#shells.get(ns);
    if (shell === undefined) {
      shell = new NamespaceShell(ns, LAB_ENV);
      this.#shells.set(ns, shell);
      this.#processes.set(shell.pid, shell.child);
    }
    return shell;
  }

  /** Starts a long-running command inside a namespace; destroy() kills it if the test did not. */
  spawn(
    ns: string,
    cmd: string,
    args: readonly string[],
    options: { readonly stdin?: boolean } = {},
  ): LabProcess {
    this.#own(ns);
    // `ip netns exec` execs the command in place, so the PID is the command's own.
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], {
      stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      env: LAB_ENV,
    });
    // 'close', not 'exit': it comes once stdout is drained too, so output() is complete. After
    // 'exit' the last lines may still be in the pipe, notably on a busy machine.
    const closed = new Promise<ProcessEnd>((resolve) =>
      child.once('close', (code, signal) => resolve({ code, signal })),
    );
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const pid = child.pid;
    if (pid === undefined) throw new Error(`could not start ${cmd} in ${ns}`);
    this.#processes.set(pid, child);
    // A write to a process that died fails with EPIPE: its waitFor() reports the death.
    child.stdin?.on('error', () => {});
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8');
    child.stderr?.setEncoding('utf8');
    // Each waitFor() listens until its marker comes and then stops; a long-lived prober has many
    // in flight at once (test/trace: 32), which is not the leak Node's warning at 10 guesses.
    child.setMaxListeners(0);
    child.stdout?.setMaxListeners(0);
    child.stdout?.on('data', (chunk: string) => {
      out += chunk;
    });
    child.stderr?.on('data', (chunk: string) => {
      err += chunk;
    });
    const processes = this.#processes;
    const exitsWithin = async (ms: number): Promise<boolean> => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      });
      const exited = await Promise.race([closed.then(() => true as const), late]);
      clearTimeout(timer);
      return exited;
    };
    return {
      pid,
      output: () => out,
      send(text) {
        if (!child.stdin) throw new Error(`${cmd} in ${ns} was not spawned with stdin`);
        child.stdin.write(text);
      },
      waitFor(marker, timeoutMs = START_DEADLINE_MS, since = 0) {
        return new Promise((resolve, reject) => {
          // Where the first line not yet ruled out begins. Only whole lines match (a chunk may end
          // in a line's middle, just past the marker), and each check reads only what came since
          // the last: a prober at 20 connections a second prints ~1 MB in ten minutes, and with
          // dozens of probes in flight, splitting all of it at every chunk for each of them took
          // the VM's one emulated CPU.
          let from = since;
          const check = (whole = false): boolean => {
            const at = out.indexOf(marker, from);
            const start = at === -1 ? -1 : out.lastIndexOf('\n', at) + 1;
            let end = at === -1 ? -1 : out.indexOf('\n', at);
            if (at !== -1 && end === -1 && whole) end = out.length;
            if (end === -1) {
              from = at === -1 ? Math.max(from, out.lastIndexOf('\n') + 1) : start;
              return false;
            }
            finish();
            resolve(out.slice(start, end));
            return true;
          };
          const onExit = (): void => {
            // The last line, written without its newline, is whole once the process closed.
            if (check(true)) return;
            finish();
            reject(new Error(`${cmd} in ${ns} exited before printing ${marker}: ${err.trim()}`));
          };
          const timer = setTimeout(() => {
            finish();
            reject(
              new Error(
                `${cmd} in ${ns} did not print ${marker} within ${timeoutMs} ms; it printed:\n${out.slice(-2000)}${err.slice(-2000)}`,
              ),
            );
          }, timeoutMs);
          const finish = (): void => {
            clearTimeout(timer);
            child.stdout?.off('data', onData);
            child.off('close', onExit);
          };
          const onData = (): void => void check();
          if (check()) return;
          child.stdout?.on('data', onData);
          child.once('close', onExit);
        });
      },
      async stop(withinMs) {
        if (!processes.delete(pid)) throw new Error(`${cmd} in ${ns} was already stopped`);
        killPid(pid, 'SIGTERM');
        if (await exitsWithin(withinMs)) return closed;
        const why =
          child.exitCode === null ? 'did not stop' : 'exited, but a child of it kept its stdout open,';
        killPid(pid, 'SIGKILL');
        await exited;
        throw new Error(`${cmd} in ${ns} ${why} within ${withinMs} ms of SIGTERM; output:\n${out}${err}`);
      },
      async kill() {
        if (!processes.delete(pid)) return;
        killPid(pid, 'SIGTERM');
        if (await exitsWithin(KILL_GRACE_MS)) return;
        killPid(pid, 'SIGKILL');
        await exited;
      },
    };
  }

  /** Kills the lab's processes and deletes its namespaces (which removes their links). */
  async destroy(): Promise<void> {
    for (const [pid, child] of this.#processes) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      killPid(pid, 'SIGKILL');
      await exited;
    }
    this.#processes.clear();
    for (const shell of this.#shells.values()) await shell.removeFiles();
    this.#shells.clear();
    // Forget a namespace only once it is gone, so an exit half-way still finds the rest.
    for (let ns = this.#namespaces.at(-1); ns !== undefined; ns = this.#namespaces.at(-1)) {
      await execa('ip', ['netns', 'del', ns], { reject: false });
      this.#namespaces.pop();
    }
    liveLabs.delete(this);
  }

  /** destroy() for process exit, when no promise can run any more. */
  destroySync(): void {
    for (const pid of this.#processes.keys()) killPid(pid, 'SIGKILL');
    this.#processes.clear();
    for (const shell of this.#shells.values()) shell.removeFilesSync();
    this.#shells.clear();
    for (const ns of this.#namespaces.splice(0).reverse()) {
      try {
        execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
      } catch {
        // Already gone.
      }
    }
    liveLabs.delete(this);
  }

  #own(ns: string): void {
    if (!this.#namespaces.includes(ns)) throw new Error(`${ns} is not a namespace of lab ${this.tag}`);
  }
}

function killPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already exited.
  }
}
