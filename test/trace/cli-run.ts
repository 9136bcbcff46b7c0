// Runs `kproxy trace` / `kproxy render` in-process and captures what they print.
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { renderCommand } from '../../src/cli/render.ts';
import { traceCommand } from '../../src/cli/trace.ts';

export interface Captured {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function capture() {
  const out = { stdout: '', stderr: '' };
  const io = {
    stdout: { write: (text: string) => (out.stdout += text) },
    stderr: { write: (text: string) => (out.stderr += text) },
    stdin: (async function* () {})(),
  };
  return { out, io };
}

/** `kproxy trace ARGS`; with `netns`, --live reads that namespace's kernel (or asks `runner`). */
export async function runTrace(args: readonly string[], netns?: string | CommandRunner): Promise<Captured> {
  const { out, io } = capture();
  const runner = typeof netns === 'string' ? execaRunner(['ip', 'netns', 'exec', netns]) : netns;
  const code = await traceCommand(args, io, runner ? { runner } : {});
  return { code, ...out };
}

export async function runRender(args: readonly string[]): Promise<Captured> {
  const { out, io } = capture();
  const code = await renderCommand(args, io);
  return { code, ...out };
}
