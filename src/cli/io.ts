// The process streams the CLI uses, injectable so tests never touch the real ones.

export interface TextWriter {
  write(text: string): unknown;
}

export interface CliIO {
  readonly stdout: TextWriter;
  readonly stderr: TextWriter;
  /** Read only when an input is `-`. */
  readonly stdin: AsyncIterable<string | Uint8Array>;
}

export function processIO(): CliIO {
  // `kproxy render | head` closes the pipe early; that is the reader's choice, not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin };
}

export async function readAllText(stream: AsyncIterable<string | Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of stream)
    text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}
