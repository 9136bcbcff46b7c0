// A pino logger whose output a test can read back: every line, parsed, as it is logged.
import { type Logger, pino } from 'pino';

export interface CapturedLogger {
  readonly logger: Logger;
  readonly lines: Record<string, unknown>[];
}

export function capturedLogger(level = 'debug'): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  // A plain { write } destination is written synchronously: a line is there as soon as it is logged.
  const logger = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}
