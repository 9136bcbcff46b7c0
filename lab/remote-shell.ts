// Commands on the Vagrant lab's VMs, over ssh with the configuration `vagrant ssh-config` prints
// (one ssh per command is far faster than `vagrant ssh`). Behind an interface so the Vagrant
// driver can be checked here, where no VM runs, with a recorded shell.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

export interface RemoteResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/** A command left running on a VM. */
export interface RemoteProcess {
  /** Everything it printed so far, lines without carriage returns. */
  output(): string;
  kill(): Promise<void>;
}

export interface RemoteShell {
  /** Runs a shell command line on `host` (a VM name) and waits for it. */
  run(host: string, command: string, options?: { readonly input?: string }): Promise<RemoteResult>;
  /** Starts a command on `host` with a terminal, so that kill() hangs it up on the VM too. */
  start(host: string, command: string): RemoteProcess;
  close(): Promise<void>;
}

/** 'it''s' → a single-quoted word for a POSIX shell. */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

export function shellLine(words: readonly string[]): string {
  return words.map(shellQuote).join(' ');
}

export async function sshShell(vagrantDir: string): Promise<RemoteShell> {
  const { stdout } = await execa('vagrant', ['ssh-config'], { cwd: vagrantDir });
  const dir = await mkdtemp(join(tmpdir(), 'kproxy-vagrant-'));
  const config = join(dir, 'ssh-config');
  await writeFile(config, stdout);
  const sshArgs = (host: string, command: string, tty: boolean) => [
    '-F',
    config,
    '-o',
    'LogLevel=ERROR',
    ...(tty ? ['-tt'] : []),
    host,
    '--',
    command,
  ];
  const children = new Set<ChildProcess>();
  return {
    async run(host, command, options = {}) {
      const result = await execa('ssh', sshArgs(host, command, false), {
        input: options.input ?? '',
        reject: false,
      });
      return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode ?? -1 };
    },
    start(host, command) {
      const child = spawn('ssh', sshArgs(host, command, true), { stdio: ['pipe', 'pipe', 'ignore'] });
      children.add(child);
      let out = '';
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => {
        out += chunk.replaceAll('\r', '');
      });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      return {
        output: () => out,
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
          children.delete(child);
        },
      };
    },
    async close() {
      for (const child of children) child.kill('SIGTERM');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
