// A CommandRunner for unit tests: records every call and answers from a handler (default: success).
import type { CommandResult, CommandRunner } from '../../../dataplanes/shared/command-runner.ts';

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

  async run(command: string, args: readonly string[], input = ''): Promise<CommandResult> {
    const call = { command, args, input };
    this.calls.push(call);
    return { stdout: '', stderr: '', exitCode: 0, ...this.#answer(call) };
  }

  restores(): RecordedCall[] {
    return this.calls.filter((c) => c.command.endsWith('-restore'));
  }
}
