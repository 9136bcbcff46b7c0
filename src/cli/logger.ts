// The daemon's log lines in kube-proxy's two formats (--logging-format, logging.format):
// - text, kube-proxy's default: klog's structured text, one line per record,
//   `I1205 07:24:49.123456   12345 sync-loop.ts:123] "rules synced" kind="full" durationMs=12`
//   (severity I/W/E, mmdd hh:mm:ss.uuuuuu local time, the process id as klog prints its thread id,
//   file:line, then the quoted message and key=value pairs; a multi-line string as key=<...> with
//   each line indented by a tab, as klog writes it).
// - json: component-base's JSON logger (zap): {"ts":<ms since the epoch>,"caller":"dir/file:line",
//   "msg":...,"v":N,...fields}; errors carry no "v", warnings are "v":0 (logr has no warning level).
// pino stays the logger (every module logs through it as before, with the same fields); its JSON
// line goes to a destination that rewrites it in the chosen format. Log lines are few (per sync,
// per change of state, not per packet), so parsing each one back is cheap; the caller's file:line
// is read from a stack trace only for the lines the level lets through.
import { type LevelWithSilent, type Logger, pino } from 'pino';

export type LogFormat = 'text' | 'json';

/** Where the lines go: stdout for run (journald or the container runtime collects them). */
export interface LogSink {
  write(text: string): unknown;
}

/** pino's numeric levels. */
const WARN = 40;
const ERROR = 50;

/** kube-proxy's -v for pino's levels below warn (the inverse of run's logLevel). */
const VERBOSITY: Readonly<Record<number, number>> = { 10: 4, 20: 2, 30: 0, [WARN]: 0 };

/** Fields of pino's own, not the caller's: they go into the header (text) or are renamed (json). */
const OWN_FIELDS = new Set(['level', 'time', 'msg', 'caller', 'pid', 'hostname']);

/** A record as pino serialized it. */
export interface LogRecord {
  readonly level: number;
  /** Milliseconds since the epoch, with a fraction. */
  readonly time: number;
  readonly msg?: string;
  /** "dir/file.ts:line" of the code that logged. */
  readonly caller?: string;
  readonly [field: string]: unknown;
}

export function createLogger(format: LogFormat, level: LevelWithSilent, sink: LogSink): Logger {
  const render = format === 'json' ? structuredJson : (record: LogRecord) => klogText(record, process.pid);
  return pino(
    {
      level,
      base: undefined,
      // Sub-millisecond: klog's header has microseconds, component-base's ts a fraction of a ms.
      timestamp: () => `,"time":${performance.timeOrigin + performance.now()}`,
      mixin: () => ({ caller: callerOf(stackFrames()) }),
    },
    { write: (line: string) => sink.write(render(JSON.parse(line) as LogRecord)) },
  );
}

/** A frame of the stack: its file (a file: URL for an ES module, a path for CommonJS) and line. */
export interface Frame {
  readonly file: string;
  readonly line: number;
}

/**
 * This module, as the stack names it: a .ts file in a checkout, the package's compiled .js once
 * installed, so its frames are known by where it is rather than by a file name.
 */
const SELF = import.meta.url;

/**
 * The stack's frames as V8's call sites give them, without formatting the stack as text and
 * matching it line by line: a caller is read for every line (one a sync: ~100 a second in a
 * rollout at 1,000 writes a second), and that was a quarter of what the sync's line cost.
 */
function stackFrames(): Frame[] {
  const format = Error.prepareStackTrace;
  Error.prepareStackTrace = (_error, sites) => sites;
  try {
    const sites = new Error().stack as unknown as readonly NodeJS.CallSite[];
    return sites.map((site) => ({ file: site.getFileName() ?? '', line: site.getLineNumber() ?? 0 }));
  } finally {
    Error.prepareStackTrace = format;
  }
}

/**
 * The first frame outside pino and this module (`self`), as zap's short caller ("dir/file.ts:line").
 * The frames above it are the stack's reading, this mixin, pino's write and its level method.
 */
export function callerOf(frames: readonly Frame[], self = SELF): string {
  for (const { file, line } of frames) {
    if (file === '' || file === self || file.includes('/node_modules/pino/')) continue;
    return `${file.split('/').slice(-2).join('/')}:${line}`;
  }
  return '???:1';
}

/** klog's severity letter: info (any verbosity) I, warn W, error and fatal E. */
function severity(level: number): string {
  return level >= ERROR ? 'E' : level >= WARN ? 'W' : 'I';
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** One record in klog's structured text format, newline-terminated. */
export function klogText(record: LogRecord, pid: number): string {
  const at = new Date(record.time);
  const micros = Math.min(999_999, Math.round((record.time % 1000) * 1000));
  const file = (record.caller ?? '???:1').split('/').pop();
  const header =
    `${severity(record.level)}${pad(at.getMonth() + 1)}${pad(at.getDate())} ` +
    `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(micros, 6)} ` +
    `${String(pid).padStart(7)} ${file}]`;
  let line = `${header} ${JSON.stringify(record.msg ?? '')}`;
  for (const [key, value] of Object.entries(record)) {
    if (OWN_FIELDS.has(key) || value === undefined) continue;
    line += key === 'err' ? errorText(value) : ` ${key}=${textValue(value)}`;
  }
  return `${line}\n`;
}

/** klog's err="..." for an error pino serialized ({type, message, stack}); the stack follows. */
function errorText(err: unknown): string {
  if (typeof err !== 'object' || err === null) return ` err=${textValue(err)}`;
  const { message, stack, ...rest } = err as { message?: unknown; stack?: unknown };
  let text = ` err=${textValue(message ?? '')}`;
  for (const [key, value] of Object.entries(rest))
    if (key !== 'type') text += ` err.${key}=${textValue(value)}`;
  if (typeof stack === 'string') text += ` stack=${textValue(stack)}`;
  return text;
}

/** A value as klog's text format writes it: strings quoted, multi-line ones in <...>, others bare. */
function textValue(value: unknown): string {
  if (typeof value === 'string') {
    if (!value.includes('\n')) return JSON.stringify(value);
    return `<\n${value
      .split('\n')
      .map((line) => `\t${line}`)
      .join('\n')}\n >`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return JSON.stringify(value);
}

/** One record as component-base's JSON logger writes it, newline-terminated. */
export function structuredJson(record: LogRecord): string {
  const fields: Record<string, unknown> = {
    ts: record.time,
    caller: record.caller ?? '???:1',
    msg: record.msg ?? '',
  };
  const v = VERBOSITY[record.level];
  if (v !== undefined) fields.v = v;
  for (const [key, value] of Object.entries(record)) if (!OWN_FIELDS.has(key)) fields[key] = value;
  return `${JSON.stringify(fields)}\n`;
}
