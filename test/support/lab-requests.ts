// A Node program a kernel test runs inside a lab namespace (its netlink socket must be opened
// there), kept up for many requests instead of started for each: a Node start is ~0.5 s of CPU
// (~0.15 s from the compile cache), and a seeded test made two a seed. The program serves its
// requests over stdin, one JSON line each ({"id":N,"args":[...]}), answered in order by one line
// {"id":N,"result":...} or {"id":N,"error":"..."}, until stdin closes.
import { createInterface } from 'node:readline';
import { allowance } from '../../harness/emulation.ts';
import type { Lab, LabProcess } from '../../harness/netns.ts';

/**
 * How long a request may take. The slowest (netlink-sync-main's daemon-like cold start of 12,100
 * elements) took ~2.5 s of CPU measured, so up to ~13 s at the design load (harness/emulation.ts);
 * the deadline bounds a hang, with the margin the others have.
 */
export const REQUEST_DEADLINE_MS = allowance(60_000);

/** The program's side: answers each request line (its arguments) with what `handle` resolves to. */
export function serveRequests(handle: (args: string[]) => Promise<unknown>): void {
  const lines = createInterface({ input: process.stdin });
  // One at a time, in order: each request's kernel state is the test's to set up before it.
  let queue = Promise.resolve();
  lines.on('line', (line) => {
    const { id, args } = JSON.parse(line) as { id: number; args: string[] };
    queue = queue.then(async () => {
      const answer = await handle(args).then(
        (result) => ({ id, result }),
        (error: Error) => ({ id, error: error.stack ?? String(error) }),
      );
      process.stdout.write(`${JSON.stringify(answer)}\n`);
    });
  });
}

/** The test's side: the program `main` in each namespace it is asked for, started at its first request. */
export class LabRequests {
  readonly #lab: Lab;
  readonly #main: string;
  readonly #servers = new Map<string, LabProcess>();
  #next = 0;

  constructor(lab: Lab, main: string) {
    this.#lab = lab;
    this.#main = main;
  }

  /** What the program in `ns` answers to `args`; throws its error. */
  async request(ns: string, args: readonly string[]): Promise<Record<string, unknown>> {
    let server = this.#servers.get(ns);
    if (server === undefined) {
      server = this.#lab.spawn(ns, process.execPath, [this.#main], { stdin: true });
      this.#servers.set(ns, server);
    }
    const id = this.#next++;
    const since = server.output().length;
    server.send(`${JSON.stringify({ id, args })}\n`);
    const line = await server.waitFor(`{"id":${id},`, REQUEST_DEADLINE_MS, since);
    const answer = JSON.parse(line) as { result?: Record<string, unknown>; error?: string };
    if (answer.error !== undefined) throw new Error(`${args.join(' ')} in ${ns}: ${answer.error}`);
    return answer.result!;
  }
}
