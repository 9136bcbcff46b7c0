// A CliIO that records what the CLI writes, for tests.
import { Readable } from 'node:stream';
import type { CliIO } from '../../src/cli/io.ts';

export interface CapturedIO {
  readonly io: CliIO;
  stdout(): string;
  stderr(): string;
}

export function captureIO(stdinText = ''): CapturedIO {
  let out = '';
  let err = '';
  return {
    io: {
      stdout: { write: (text: string) => (out += text) },
      stderr: { write: (text: string) => (err += text) },
      stdin: Readable.from([stdinText]),
    },
    stdout: () => out,
    stderr: () => err,
  };
}
