// Probes for the IPVS VM tests: `harness/echo-client.ts --serve` in a namespace of the VM (or the
// VM's own, the node: ''), taking probes by id over its stdin. One node start per namespace, not
// one per probe: each start costs seconds under TCG (a process per probe was ~3 min of the VM run).
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { EchoOutcome, ProbeRequest } from '../../../../harness/echo-client.ts';

const ECHO_CLIENT = join(import.meta.dirname, '../../../../harness/echo-client.ts');

export class Prober {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiting = new Map<number, { resolve(o: EchoOutcome[]): void; reject(e: Error): void }>();
  #ids = 0;
  #stderr = '';

  /** `ns` '' probes from the VM's own namespace; otherwise a namespace the caller made (and deletes). */
  constructor(ns: string) {
    const command = [process.execPath, ECHO_CLIENT, '--serve'];
    this.#child =
      ns === '' ? spawn(command[0]!, command.slice(1)) : spawn('ip', ['netns', 'exec', ns, ...command]);
    this.#child.stderr.setEncoding('utf8');
    this.#child.stderr.on('data', (chunk: string) => {
      this.#stderr += chunk;
    });
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const { id, outcomes } = JSON.parse(line) as { id: number; outcomes: EchoOutcome[] };
      this.#waiting.get(id)?.resolve(outcomes);
      this.#waiting.delete(id);
    });
    // A probe in flight when the prober dies would wait forever.
    this.#child.once('close', (code, signal) => {
      for (const { reject } of this.#waiting.values())
        reject(new Error(`the prober in ${ns || 'the node'} ended (${code ?? signal}): ${this.#stderr}`));
      this.#waiting.clear();
    });
  }

  /** `count` attempts in turn, each bounded by `timeoutMs`; probes sent together run concurrently. */
  probe(request: Omit<ProbeRequest, 'id'>): Promise<EchoOutcome[]> {
    const id = ++this.#ids;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#child.stdin.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  /** It exits once its stdin closes and the probes in flight are answered. */
  close(): void {
    this.#child.stdin.end();
  }
}
