// Running the kernel tools (iptables-restore, conntrack, ...) behind a small interface, so unit
// tests can record calls and kernel tests can run them inside a throwaway network namespace.
//
// Nothing the real runner starts may outlive kproxy or run for ever:
// - a script (`input`) reaches the tool whole or not at all. It is written to a private file first
//   and the tool's stdin is that file, never a pipe: a daemon killed while feeding a pipe leaves
//   the tool an EOF after a prefix, and `nft -f -` commits the complete commands of that prefix;
// - every child is started under `setpriv --pdeathsig KILL` (util-linux), so the kernel kills it
//   when kproxy dies, however it dies: no child of a dead daemon commits while a new one starts.
//   (The short window between the fork and setpriv's prctl is covered under systemd: the unit's
//   default KillMode=control-group kills whatever is left in the cgroup before a restart.)
// - every command has a timeout (commandTimeoutMs): a stuck tool is killed and the sync that ran
//   it fails with CommandTimeoutError; the sync loop logs and counts it and retries.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { execa } from 'execa';
import { CommandTimeoutError, DataplaneError } from '../../contract/dataplane-error.ts';

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/**
 * A tool's stdin: one text, or pieces that are the text joined. A full sync's iptables-legacy input
 * is ~100 MB at 30,000 Services: joined into one string, then encoded and written at once, it held
 * the daemon's event loop for 1–2.6 s; in pieces each is written in its own turn.
 */
export type ScriptInput = string | readonly string[];

/** The whole text of an input. */
export function scriptText(input: ScriptInput = ''): string {
  return typeof input === 'string' ? input : input.join('');
}

export interface CommandRunner {
  /**
   * Runs `command args` with `input` on stdin. Never throws for a non-zero exit: callers decide.
   * Throws CommandTimeoutError when the command ran out of time (it was killed).
   */
  run(command: string, args: readonly string[], input?: ScriptInput): Promise<CommandResult>;
  /** Starts a long-lived `command args` with piped stdio (e.g. `nft -i`), where supported. */
  spawn?(command: string, args: readonly string[]): ChildProcessWithoutNullStreams;
  /**
   * As run, without input, stdout written to `output` (an open file) rather than returned, where
   * supported: for listings of megabytes that nft 1.0.6 writes unbuffered, a write per element,
   * which into a pipe took 2.5 times as long as into a file (kproxy's table at 30k services).
   */
  runToFile?(command: string, args: readonly string[], output: FileHandle): Promise<CommandResult>;
}

/**
 * How long each tool may run. The bounds come from what each does at 30,000 services (kube-proxy's
 * scale limit) on a busy 2-core node, with a wide margin: a timeout is there to end a stuck tool,
 * never to cut a slow but working one short (a killed sync is retried in full, and would be as slow).
 */
export function commandTimeoutMs(command: string): number {
  const tool = basename(command);
  // The cold-start transaction takes ~10 s at 30k services x 10 endpoints (docs/benchmarks-log.md);
  // listing a small set or map of that size well under a second (the whole table: listingTimeoutMs).
  if (tool === 'nft') return 120_000;
  // The drift check's one `nft -i` under `sh` (drift/nft-tables.ts) loads and lists what of the
  // render the kernel does not list alike: little, unless the table is gone or flushed; then all
  // of it, which at 30k services x 10 endpoints on a 2-core host at load ~48 took 161 s (the load
  // alone 37 s); a stuck one only delays a repair already decided.
  if (tool === 'sh') return 300_000;
  // A bare flushing iptables-nft-restore of 10k services takes ~25 s (docs/benchmarks-log.md);
  // kproxy splits larger ones into parts, iptables-legacy is faster; -save reads one table. Both
  // also wait up to 5 s for the xtables lock (IPTABLES_WAIT).
  if (/^ip6?tables-.*(restore|save)$/.test(tool)) return 120_000;
  // IPVS mode binds every service address to its dummy link in one `ip -batch`, quadratic in the
  // kernel (each add walks the link's address list): 30,000 addresses took 17.8 s on a 2-core host
  // at load 2.4, 1.7 s for 10,000 (docs/benchmarks-log.md, the IPVS section).
  if (tool === 'ip') return 120_000;
  // iptables/ip6tables check or insert one rule (iptables-nft reads the table's cache first, ~1 s
  // at 30k), conntrack deletes the flows of one endpoint, sysctl/ipset/ipvsadm change one object:
  // milliseconds each.
  return 30_000;
}

/**
 * How long a listing into a file (runToFile) may run: nft 1.0.6 listing kproxy's table at 30k
 * services x 10 endpoints into a file took 19.7 s of CPU (10.5 user, 9.2 system; 78.6 s at load
 * ~14 on 2 cores). At the design load (harness/emulation.ts: 5 runnable tasks a core, a fifth of a
 * core each) that is ~100 s, with the tests' margin of 2: 200 s. nft's 120 s would cut it short.
 */
export function listingTimeoutMs(command: string): number {
  return Math.max(commandTimeoutMs(command), 200_000);
}

/**
 * kube-proxy's `--wait 5`, for every iptables tool: wait at most 5 s for the xtables lock (held by
 * kubelet, a CNI plugin, ...), then fail. A sync that fails on it is retried; waiting for ever is not.
 */
export const IPTABLES_WAIT: readonly string[] = ['--wait', '5'];

export interface ExecaRunnerOptions {
  /** Per command (default commandTimeoutMs, listingTimeoutMs for runToFile); tests shorten it. */
  readonly timeoutMs?: (command: string) => number;
}

/**
 * The real thing. `prefix` runs every command through another one, e.g.
 * ['ip', 'netns', 'exec', 'kp123-test'] to act inside a network namespace.
 */
export function execaRunner(prefix: readonly string[] = [], options: ExecaRunnerOptions = {}): CommandRunner {
  const timeoutOf = options.timeoutMs ?? commandTimeoutMs;
  const listingTimeoutOf = options.timeoutMs ?? listingTimeoutMs;
  const argv = (command: string, args: readonly string[]) => [
    'setpriv',
    '--pdeathsig',
    'KILL',
    '--',
    ...prefix,
    command,
    ...args,
  ];
  // execa takes any file descriptor for stdin or stdout (the child inherits it); its types list
  // only some, hence the casts.
  const execute = async (
    command: string,
    args: readonly string[],
    stdin: number | 'ignore',
    stdout: number | 'pipe' = 'pipe',
  ) => {
    const [file, ...rest] = argv(command, args);
    const timeout = stdout === 'pipe' ? timeoutOf(command) : listingTimeoutOf(command);
    const result = await execa(file!, rest, {
      stdin: stdin as 'ignore',
      stdout: stdout as 'pipe',
      reject: false,
      stripFinalNewline: false,
      encoding: 'utf8',
      timeout,
      // setpriv and `ip netns exec` exec the tool in place: this kills the tool itself.
      killSignal: 'SIGKILL',
    });
    if (result.timedOut) throw new CommandTimeoutError(command, timeout, [command, ...args].join(' '));
    if (result.failed && result.exitCode === undefined) {
      // Not a non-zero exit but a spawn failure (missing binary): report it like one.
      return { stdout: '', stderr: result.shortMessage ?? `cannot run ${file}`, exitCode: 127 };
    }
    return {
      stdout: stdout === 'pipe' ? String(result.stdout) : '',
      stderr: String(result.stderr),
      exitCode: result.exitCode ?? 0,
    };
  };
  return {
    async run(command, args, input = '') {
      const pieces = typeof input === 'string' ? [input] : input;
      const stdin = pieces.every((piece) => piece === '') ? undefined : await scriptFile(pieces);
      try {
        return await execute(command, args, stdin?.fd ?? 'ignore');
      } finally {
        await stdin?.close();
      }
    },
    runToFile: (command, args, output) => execute(command, args, 'ignore', output.fd),
    spawn(command, args) {
      const [file, ...rest] = argv(command, args);
      return spawn(file!, rest, { stdio: 'pipe' });
    },
  };
}

/**
 * The script's pieces in a private file, one after another, the event loop free between them;
 * opened for reading at its start and unlinked before a byte is written, so nothing is left behind
 * whatever happens next (SIGKILL included). Created exclusively (O_EXCL, mode 0600) under the
 * temporary directory: under the systemd unit that is its PrivateTmp, writable despite
 * ProtectSystem=strict and on disk rather than in memory like /run (a full sync's script is tens of
 * megabytes at 30k services), private to kproxy and removed by systemd with the unit. A full disk
 * is the node's trouble, not a bug in kproxy: it fails the sync as a DataplaneError.
 */
async function scriptFile(pieces: readonly string[]) {
  const path = join(tmpdir(), `kproxy-${process.pid}-${randomBytes(8).toString('hex')}.script`);
  try {
    const writer = await open(path, 'wx', 0o600);
    try {
      const reader = await open(path, 'r');
      await unlink(path);
      try {
        // writeFile writes from the file's position on, the whole piece (write may stop short).
        for (const piece of pieces) await writer.writeFile(piece);
      } catch (error) {
        await reader.close();
        throw error;
      }
      return reader;
    } finally {
      await writer.close();
      await unlink(path).catch(() => {});
    }
  } catch (error) {
    throw new DataplaneError(
      `cannot write the script for the kernel tool to ${path}: ${(error as Error).message}`,
    );
  }
}
