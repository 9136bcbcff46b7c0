// Runs `kproxy trace` / `kproxy render` in-process and captures what they print.
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { renderCommand } from '../../src/cli/render.ts';
import { traceCommand } from '../../src/cli/trace.ts';
import { captureIO } from '../cli/capture-io.ts';

export interface Captured {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `kproxy trace ARGS`; with `netns`, --live reads that namespace's kernel (or asks `runner`). */
export async function runTrace(args: readonly string[], netns?: string | CommandRunner): Promise<Captured> {
  const captured = captureIO();
  const runner = typeof netns === 'string' ? execaRunner(['ip', 'netns', 'exec', netns]) : netns;
  const code = await traceCommand(args, captured.io, runner ? { runner } : {});
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}

export async function runRender(args: readonly string[]): Promise<Captured> {
  const captured = captureIO();
  const code = await renderCommand(args, captured.io);
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}
