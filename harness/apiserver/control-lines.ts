// What a test can tell the stand-in API server process (main.ts) on stdin, one command a line,
// for what it cannot do over the API: a control-plane upgrade and the faults around one.
//   restart <minor>                    stop, and listen again on the same address as that minor
//   fail <code> <count> [retryAfter]   answer the next <count> GETs with <code>: 500 or 503 with a
//                                      Status, 429 as an overloaded server sheds a request (overloadNext)
//   reset <count>                      reset the connections of the next <count> GETs
// The answer is the line to print once done ("restarted 1.33", "armed fail 503 2"), or a refusal.

import { isMinor } from './profiles.ts';
import type { StandInApiServer } from './server.ts';

export type ControlAnswer =
  | { readonly ok: true; readonly line: string }
  | { readonly ok: false; readonly error: string };

const FAULT_CODES = [429, 500, 503];

export async function applyControlLine(server: StandInApiServer, line: string): Promise<ControlAnswer> {
  const [command, ...args] = line.trim().split(/\s+/);
  const counts = args.map(Number);
  const refuse = (why: string): ControlAnswer => ({ ok: false, error: `${JSON.stringify(line)}: ${why}` });
  const countOk = (n: number | undefined) => n !== undefined && Number.isInteger(n) && n > 0;
  switch (command) {
    case 'restart': {
      const minor = args[0] ?? '';
      if (args.length !== 1 || !isMinor(minor)) return refuse('expected restart <minor> (1.29..1.38)');
      await server.restartAs(minor);
      return { ok: true, line: `restarted ${minor}` };
    }
    case 'fail': {
      const [code, count, retryAfter] = counts;
      if (!FAULT_CODES.includes(code ?? 0) || !countOk(count) || args.length > 3)
        return refuse('expected fail <429|500|503> <count> [retryAfterSeconds]');
      if (code === 429) server.faults.overloadNext(count!, retryAfter ?? 1);
      else server.faults.failNext(count!, code!, retryAfter);
      return { ok: true, line: `armed ${line.trim()}` };
    }
    case 'reset':
      if (args.length !== 1 || !countOk(counts[0])) return refuse('expected reset <count>');
      server.faults.resetNext(counts[0]!);
      return { ok: true, line: `armed ${line.trim()}` };
    default:
      return refuse('unknown command (restart, fail, reset)');
  }
}
