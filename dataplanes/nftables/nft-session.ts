// A persistent `nft -i` for small transactions: spawning nft costs 10-25 ms per transaction
// (at 30k services x 10 endpoints, measured: 22.6 ms per `nft -f`, of which 10.9 ms is the spawn
// alone), while one line to a running `nft -i` is committed in about 2 ms, its cache included.
//
// nft 1.0.6 in interactive mode runs each input line as one transaction (`a; b` on one line is
// atomic), prints nothing on success and the error, the line and carets on stderr on failure.
// After each transaction we send a sentinel that always fails the same recognisable way (listing
// a table that never exists); its error on the same stderr stream marks the end of the
// transaction's output, so whatever error text precedes it belongs to the transaction.
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { NftError } from './nft-runner.ts';

/** Starts `nft -i` (in the right network namespace). */
export type NftSpawner = () => ChildProcessWithoutNullStreams;

/**
 * The script as one line: an element list's line breaks become spaces, command breaks `;`.
 * Rules and comments never contain a line break (NftTransaction refuses them).
 */
export function oneLine(script: string): string {
  return script.trimEnd().replaceAll('\n\t', ' ').replaceAll('\n}', ' }').replaceAll('\n', '; ');
}

interface Pending {
  readonly sentinel: string;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

export class NftSession {
  readonly #spawn: NftSpawner;
  #child: ChildProcessWithoutNullStreams | undefined;
  #stderr = '';
  #pending: Pending | undefined;
  #queue: Promise<void> = Promise.resolve();
  #sequence = 0;

  constructor(spawn: NftSpawner) {
    this.#spawn = spawn;
  }

  /** Runs `script` as one transaction; throws NftError when nft refuses it. */
  run(script: string): Promise<void> {
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
    const sentinel = `kproxy-end-${process.pid}-${++this.#sequence}`;
    // Idle, the session keeps no one alive; a transaction in flight does.
    const stream = child.stderr as unknown as { ref(): void; unref(): void };
    stream.ref();
    return new Promise<void>((resolve, reject) => {
      this.#pending = { sentinel, resolve, reject };
      child.stdin.write(`${oneLine(script)}\nlist table ip ${sentinel}\n`);
    }).finally(() => stream.unref());
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
