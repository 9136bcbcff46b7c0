// A persistent `nft -i` for small transactions: spawning nft costs 10-25 ms per transaction
// (at 30k services x 10 endpoints, measured: 22.6 ms per `nft -f`, of which 10.9 ms is the spawn
// alone), while one line to a running `nft -i` is committed in about 2 ms, its cache included.
//
// nft 1.0.6 in interactive mode runs each input line as one transaction (`a; b` on one line is
// atomic), prints nothing on success and the error, the line and carets on stderr on failure.
// After each transaction we send a sentinel that always fails the same recognisable way (listing
// a table that never exists); its error on the same stderr stream marks the end of the
// transaction's output, so whatever error text precedes it belongs to the transaction.
//
// Whole or nothing, even when kproxy is killed: nft reads a line cut short by EOF (its stdin closes
// when kproxy dies) and runs it, and a prefix of a line may well be a valid, shorter transaction
// (cut between two commands, or inside an address: 10.0.0.12 becomes 10.0.0.1). So a transaction
// goes to the session only when its line and the sentinel's fit in PIPE_BUF bytes (fitsSession),
// written with one write() to an empty pipe:
// - a write of at most PIPE_BUF bytes to a pipe is atomic (POSIX): the reader gets all of it or
//   none, and a signal cannot cut it; with room in the pipe, libuv makes it one write() call;
// - the pipe is empty when we write: one transaction at a time, each written only after the
//   previous sentinel's error came back, which nft prints after reading the last byte we wrote.
// So kproxy dying before the write leaves nft nothing, after it the whole line. Larger scripts go
// to `nft -f` from a complete file (command-runner.ts). The session also runs under the runner's
// parent-death signal, and a transaction that does not come back in time kills the session.
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { CommandTimeoutError } from '../../contract/dataplane-error.ts';
import { NftError } from './nft-error.ts';

/** POSIX's bound on an atomic pipe write; Linux's value, the size of a page. */
const PIPE_BUF = 4096;

/**
 * How long one transaction may take before the session is killed: a script under PIPE_BUF commits
 * in ~2 ms at 30k services, and a new session's first one also builds nft's cache of the table
 * (about a second at 30k services); 30 s only ends a stuck session.
 */
export const SESSION_TRANSACTION_TIMEOUT_MS = 30_000;

/** Starts `nft -i` (in the right network namespace). */
export type NftSpawner = () => ChildProcessWithoutNullStreams;

/**
 * The script as one line: an element list's line breaks become spaces, command breaks `;`.
 * Rules and comments never contain a line break (NftTransaction refuses them).
 */
export function oneLine(script: string): string {
  return script.trimEnd().replaceAll('\n\t', ' ').replaceAll('\n}', ' }').replaceAll('\n', '; ');
}

/** What the session writes for one transaction: its line, then the sentinel's. */
function sessionInput(script: string, sentinel: string): string {
  return `${oneLine(script)}\nlist table ip ${sentinel}\n`;
}

/** Whether `script` may go to the session: its input fits one atomic pipe write (see above). */
export function fitsSession(script: string): boolean {
  // oneLine at most halves a script (each "\n\t" becomes " "): a longer one cannot fit, and is not
  // copied three times to find out (a cold-start piece is megabytes).
  if (script.length > 2 * PIPE_BUF) return false;
  // The longest sentinel a session of this process can use.
  return Buffer.byteLength(sessionInput(script, sentinelName(Number.MAX_SAFE_INTEGER))) <= PIPE_BUF;
}

function sentinelName(sequence: number): string {
  return `kproxy-end-${process.pid}-${sequence}`;
}

interface Pending {
  readonly sentinel: string;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

export class NftSession {
  readonly #spawn: NftSpawner;
  readonly #timeoutMs: number;
  #child: ChildProcessWithoutNullStreams | undefined;
  #stderr = '';
  #pending: Pending | undefined;
  #queue: Promise<void> = Promise.resolve();
  #sequence = 0;

  constructor(spawn: NftSpawner, options: { readonly timeoutMs?: number } = {}) {
    this.#spawn = spawn;
    this.#timeoutMs = options.timeoutMs ?? SESSION_TRANSACTION_TIMEOUT_MS;
  }

  /**
   * Runs `script` as one transaction; throws NftError when nft refuses it, CommandTimeoutError when
   * it does not come back in time (the session is killed). Only for scripts that fitsSession().
   */
  run(script: string): Promise<void> {
    if (!fitsSession(script)) throw new Error('nft session: script too long for one atomic pipe write');
    const result = this.#queue.then(() => this.#runNow(script));
    this.#queue = result.catch(() => {});
    return result;
  }

  /** Ends the nft process (it also ends by itself when this process exits: stdin closes). */
  close(): void {
    this.#child?.stdin.end();
    this.#child = undefined;
  }

  #runNow(script: string): Promise<void> {
    const child = this.#child ?? this.#start();
    const sentinel = sentinelName(++this.#sequence);
    // Idle, the session keeps no one alive; a transaction in flight does.
    const stream = child.stderr as unknown as { ref(): void; unref(): void };
    stream.ref();
    let timer: NodeJS.Timeout | undefined;
    return new Promise<void>((resolve, reject) => {
      const pending = { sentinel, resolve, reject };
      this.#pending = pending;
      timer = setTimeout(() => this.#timedOut(child, pending), this.#timeoutMs);
      // One write() of at most PIPE_BUF bytes to an empty pipe (see the top of this file).
      child.stdin.write(sessionInput(script, sentinel));
    }).finally(() => {
      clearTimeout(timer);
      stream.unref();
    });
  }

  /** A stuck transaction: the session is killed, whatever it would still do with it. */
  #timedOut(child: ChildProcessWithoutNullStreams, pending: Pending): void {
    if (this.#pending !== pending) return;
    this.#pending = undefined;
    if (this.#child === child) this.#child = undefined;
    child.kill('SIGKILL');
    pending.reject(new CommandTimeoutError('nft', this.#timeoutMs, 'nft -i transaction'));
  }

  #start(): ChildProcessWithoutNullStreams {
    const child = this.#spawn();
    this.#child = child;
    this.#stderr = '';
    // The session must not keep the daemon (or a test) alive.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as { unref?(): void }).unref?.();
    child.stdout.resume();
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      // A closed or killed session's last words are not its successor's output.
      if (this.#child !== child) return;
      this.#stderr += chunk;
      this.#settle();
    });
    const gone = (why: string) => {
      // A closed session's process ending later must not fail its successor's transaction.
      if (this.#child !== child) return;
      this.#child = undefined;
      const pending = this.#pending;
      this.#pending = undefined;
      pending?.reject(new NftError('-i', `nft -i ${why}: ${this.#stderr}`));
    };
    child.on('error', (error) => gone(`could not run: ${error.message}`));
    child.on('exit', (code, signal) => gone(`exited (${signal ?? code})`));
    child.stdin.on('error', () => {});
    return child;
  }

  #settle(): void {
    const pending = this.#pending;
    if (!pending) return;
    // The sentinel's error is "Error: ...", its command line, then a line of carets.
    const end = new RegExp(`(?:^|\\n)([^\\n]*)\\nlist table ip ${pending.sentinel}\\n[^\\n]*\\n`).exec(
      this.#stderr,
    );
    if (!end) return;
    const output = this.#stderr.slice(0, end.index);
    this.#stderr = this.#stderr.slice(end.index + end[0].length);
    this.#pending = undefined;
    if (output.trim() === '') pending.resolve();
    else pending.reject(new NftError('-i', output));
  }
}
