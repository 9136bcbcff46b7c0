// One command runner inside a lab's network namespace (namespace-shell.pl, started with
// `ip netns exec`, so /sys and /etc/netns are the namespace's, as for a command started that way).
// The lab's commands go to it as requests and run there side by side, as separate processes would.
// Measured: forking the test's Node process took ~25 ms of its main thread per command (node
// --cpu-prof, live-partial), plus setpriv and `ip netns exec` (a mount namespace and a sysfs mount)
// per command; the bash loop that followed, with timeout(1), ~23 ms of CPU a command against ~9
// for this runner's one fork (300 `iptables-nft -V` on a 2-core VM, where forks are dear): two
// seeds of live-partial took 12.2 s of CPU against 14.5, of kernel-incremental 13.7 against 14.5.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const RUNNER = join(import.meta.dirname, 'namespace-shell.pl');
/** The status of a command killed with SIGKILL, as the runner reports it (128 + 9). */
const KILLED = 137;

export interface ShellResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
  /** Killed because it outran its time limit. */
  readonly timedOut: boolean;
}

/** A command under way: its process group once started, and whether its time ran out. */
interface Running {
  readonly done: (status: number) => void;
  group?: number;
  overdue: boolean;
}

export class NamespaceShell {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly #ns: string;
  readonly #dir = mkdtempSync(join(tmpdir(), 'kproxy-lab-shell-'));
  readonly #running = new Map<number, Running>();
  #next = 0;
  #ended: string | undefined;

  constructor(ns: string, env: NodeJS.ProcessEnv) {
    this.#ns = ns;
    this.child = spawn('ip', ['netns', 'exec', ns, 'perl', RUNNER, this.#dir], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env,
    });
    if (this.child.pid === undefined) throw new Error(`could not start a shell in ${ns}`);
    this.pid = this.child.pid;
    let stderr = '';
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    this.child.stdin?.on('error', () => {});
    createInterface({ input: this.child.stdout! }).on('line', (line) => this.#answer(line));
    this.child.once('close', (code, signal) => {
      this.#ended = `the shell in ${ns} ended (${signal ?? code}): ${stderr.trim()}`;
      for (const command of this.#running.values()) command.done(-1);
      this.#running.clear();
    });
  }

  /** "id started GROUP" or "id STATUS". */
  #answer(line: string): void {
    const [id, word, group] = line.split(' ');
    const command = this.#running.get(Number(id));
    if (command === undefined) return;
    if (word === 'started') {
      command.group = Number(group);
      if (command.overdue) this.#kill(command);
      return;
    }
    this.#running.delete(Number(id));
    command.done(Number(word));
  }

  /** Kills a command's process group (the runner made one for it), as timeout(1) would. */
  #kill(command: Running): void {
    if (command.group === undefined) return;
    try {
      process.kill(-command.group, 'SIGKILL');
    } catch {
      // It ended meanwhile; its status is on the way.
    }
  }

  /**
   * Runs `command` with `input` on its stdin; a command still running after `timeoutMs` is killed
   * (with anything it started in its process group) and comes back `timedOut`.
   */
  async run(
    command: string,
    args: readonly string[],
    input: string,
    timeoutMs?: number,
  ): Promise<ShellResult> {
    if (this.#ended !== undefined) throw new Error(this.#ended);
    const id = this.#next++;
    const files = {
      in: join(this.#dir, `${id}.in`),
      out: join(this.#dir, `${id}.out`),
      err: join(this.#dir, `${id}.err`),
    };
    if (input !== '') await writeFile(files.in, input);
    const words = [
      String(id),
      input === '' ? '/dev/null' : files.in,
      String(args.length + 1),
      command,
      ...args,
    ];
    const { promise, resolve } = Promise.withResolvers<number>();
    const running: Running = { done: resolve, overdue: false };
    this.#running.set(id, running);
    this.child.stdin!.write(words.map((word) => `${word}\0`).join(''));
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            running.overdue = true;
            this.#kill(running);
          }, timeoutMs);
    const status = await promise;
    clearTimeout(timer);
    if (status === -1) throw new Error(this.#ended ?? `the shell in ${this.#ns} ended`);
    const timedOut = running.overdue && status === KILLED;
    // Killed on its limit before it had opened its output files (the limit passed before the
    // runner's child got that far, or before "started" came): it wrote nothing. Any other missing
    // file is the shell's fault.
    const output = (file: string) =>
      readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        if (timedOut && error.code === 'ENOENT') return '';
        throw error;
      });
    try {
      const [stdout, stderr] = await Promise.all([output(files.out), output(files.err)]);
      return { stdout, stderr, exitCode: status, timedOut };
    } finally {
      await Promise.all(Object.values(files).map((file) => rm(file, { force: true })));
    }
  }

  async removeFiles(): Promise<void> {
    await rm(this.#dir, { recursive: true, force: true });
  }

  removeFilesSync(): void {
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
