// A CommandRunner for unit tests: records every call and answers from a handler (default: success).
import { setImmediate } from 'node:timers/promises';
import {
  type CommandResult,
  type CommandRunner,
  type ScriptInput,
  scriptText,
} from '../../../dataplanes/shared/command-runner.ts';

export interface RecordedCall {
  readonly command: string;
  readonly args: readonly string[];
  readonly input: string;
}

export type Answer = (call: RecordedCall) => Partial<CommandResult> | undefined;

export class RecordingRunner implements CommandRunner {
  readonly calls: RecordedCall[] = [];
  #answer: Answer;

  constructor(answer: Answer = () => undefined) {
    this.#answer = answer;
  }

  answer(answer: Answer): void {
    this.#answer = answer;
  }

  async run(command: string, args: readonly string[], input: ScriptInput = ''): Promise<CommandResult> {
    const call = { command, args, input: scriptText(input) };
    this.calls.push(call);
    // A real tool's run ends in a later turn of the event loop (a child's exit): answering within
    // the caller's turn would make a sync of many restores one turn, which no node ever sees.
    await setImmediate();
    return { stdout: '', stderr: '', exitCode: 0, ...this.#answer(call) };
  }

  restores(): RecordedCall[] {
    return this.calls.filter((c) => c.command.endsWith('-restore'));
  }
}
