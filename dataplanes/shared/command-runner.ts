// Running the kernel tools (iptables-restore, conntrack, ...) behind a small interface, so unit
// tests can record calls and kernel tests can run them inside a throwaway network namespace.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { execa } from 'execa';

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

export interface CommandRunner {
  /** Runs `command args` with `input` on stdin. Never throws for a non-zero exit: callers decide. */
  run(command: string, args: readonly string[], input?: string): Promise<CommandResult>;
  /** Starts a long-lived `command args` with piped stdio (e.g. `nft -i`), where supported. */
  spawn?(command: string, args: readonly string[]): ChildProcessWithoutNullStreams;
}

/**
 * The real thing. `prefix` runs every command through another one, e.g.
 * ['ip', 'netns', 'exec', 'kp123-test'] to act inside a network namespace.
 */
export function execaRunner(prefix: readonly string[] = []): CommandRunner {
  return {
    async run(command, args, input = '') {
      const [file, ...rest] = [...prefix, command, ...args];
      const result = await execa(file!, rest, {
        input,
        reject: false,
        stripFinalNewline: false,
        encoding: 'utf8',
      });
      if (result.failed && result.exitCode === undefined) {
        // Not a non-zero exit but a spawn failure (missing binary): report it like one.
        return { stdout: '', stderr: result.shortMessage ?? `cannot run ${file}`, exitCode: 127 };
      }
      return { stdout: String(result.stdout), stderr: String(result.stderr), exitCode: result.exitCode ?? 0 };
    },
    spawn(command, args) {
      const [file, ...rest] = [...prefix, command, ...args];
      return spawn(file!, rest, { stdio: 'pipe' });
    },
  };
}
