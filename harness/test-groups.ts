// Runs node commands at once, each its own process, for the qemu VM's guest (harness/vm.ts): each
// group of test files a `node --test` of its own, so the groups use the VM's vCPUs together while
// the files of one group (those that share the VM's own namespace) run one after another. Each
// command's output lines come prefixed with its number, `[1] `, so the console still reads file by
// file. Exits 0 when every command did, else with the first failed one's status.
// usage: node harness/test-groups.ts '[["--test", "a.test.ts"], ["--test", "b.test.ts"]]'
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

const commands = JSON.parse(process.argv[2] ?? '[]') as string[][];

function prefixed(stream: Readable, prefix: string): void {
  createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) =>
    process.stdout.write(`${prefix}${line}\n`),
  );
}

const statuses = await Promise.all(
  commands.map(async (args, i) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    prefixed(child.stdout, `[${i + 1}] `);
    prefixed(child.stderr, `[${i + 1}] `);
    const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
    if (code !== 0) process.stdout.write(`[${i + 1}] exited with ${code ?? signal}\n`);
    return code ?? 1;
  }),
);
process.exitCode = statuses.find((status) => status !== 0) ?? 0;
