// kproxy's log lines in kube-proxy's formats: klog's structured text (the default) and
// component-base's JSON, each line still carrying every field the code logged.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { callerOf, createLogger, klogText, type LogFormat, structuredJson } from '../../src/cli/logger.ts';

/** A logger of `format` at `level` and the lines it wrote. */
function capture(format: LogFormat, level: 'info' | 'debug' | 'trace' = 'trace') {
  const lines: string[] = [];
  const logger = createLogger(format, level, { write: (text: string) => lines.push(text) });
  return { logger, lines };
}

// 5 Dec 2026 07:24:49.123456 local time, in ms since the epoch.
const AT = new Date(2026, 11, 5, 7, 24, 49, 123).getTime() + 0.456;

describe('klog text', () => {
  test('header: severity, mmdd hh:mm:ss.uuuuuu, the pid in 7 columns, file:line; then the quoted message and key=value pairs', () => {
    const line = klogText(
      {
        level: 30,
        time: AT,
        msg: 'rules synced',
        caller: 'sync/sync-loop.ts:123',
        kind: 'full',
        durationMs: 12.5,
        ok: true,
      },
      12345,
    );
    assert.equal(
      line,
      'I1205 07:24:49.123456   12345 sync-loop.ts:123] "rules synced" kind="full" durationMs=12.5 ok=true\n',
    );
  });

  test('warn is W, error and fatal E, every verbosity I', () => {
    const letters = [10, 20, 30, 40, 50, 60].map((level) => klogText({ level, time: AT, msg: 'm' }, 1)[0]);
    assert.deepEqual(letters, ['I', 'I', 'I', 'W', 'E', 'E']);
  });

  test('strings are quoted with their escapes, objects written as JSON, multi-line strings as key=<...>', () => {
    const line = klogText(
      {
        level: 30,
        time: AT,
        msg: 'say "hi"',
        reason: 'a\tb',
        ports: [80, 443],
        script: 'add table\nflush table',
      },
      1,
    );
    assert.match(
      line,
      /\] "say \\"hi\\"" reason="a\\tb" ports=\[80,443\] script=<\n\tadd table\n\tflush table\n >\n$/,
    );
  });

  test('an error as klog\'s err="message", its stack after it', () => {
    const line = klogText(
      {
        level: 50,
        time: AT,
        msg: 'sync failed',
        err: { type: 'Error', message: 'nft: busy', stack: 'Error: nft: busy\n    at x' },
      },
      1,
    );
    assert.match(line, /"sync failed" err="nft: busy" stack=<\n\tError: nft: busy\n\t {4}at x\n >\n$/);
  });
});

describe("component-base's JSON", () => {
  test('ts (ms since the epoch), caller, msg, v, then the fields; errors have no v', () => {
    const info = structuredJson({
      level: 20,
      time: AT,
      msg: 'effective configuration',
      caller: 'cli/run.ts:9',
      mode: 'iptables',
    });
    assert.equal(
      info,
      `{"ts":${AT},"caller":"cli/run.ts:9","msg":"effective configuration","v":2,"mode":"iptables"}\n`,
    );
    const error = JSON.parse(structuredJson({ level: 50, time: AT, msg: 'x', err: { message: 'boom' } }));
    assert.equal('v' in error, false);
    assert.deepEqual(error.err, { message: 'boom' });
  });
});

describe('createLogger', () => {
  test("-v's levels: trace is v=4, debug v=2, info and warn v=0; the level set still filters", () => {
    const { logger, lines } = capture('json');
    logger.trace('t');
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l) as { v: number }).v),
      [4, 2, 0, 0],
    );
    const quiet = capture('text', 'info');
    quiet.logger.debug('hidden');
    quiet.logger.info('shown');
    assert.equal(quiet.lines.length, 1);
  });

  test('the caller is the code that logged, not pino or this module', () => {
    const { logger, lines } = capture('json');
    logger.info({ a: 1 }, 'here');
    const { caller } = JSON.parse(lines[0]!) as { caller: string };
    assert.match(caller, /^cli\/logger\.test\.ts:\d+$/);
    const text = capture('text');
    text.logger.info('here');
    assert.match(text.lines[0]!, / logger\.test\.ts:\d+\] "here"\n$/);
  });

  test('every field logged is on the line, in both formats, and child bindings too', () => {
    for (const format of ['text', 'json'] as const) {
      const { logger, lines } = capture(format);
      logger
        .child({ family: 'IPv6' })
        .warn({ port: 30080, reason: 'in use' }, 'cannot open health check node port');
      for (const piece of format === 'text'
        ? ['family="IPv6"', 'port=30080', 'reason="in use"']
        : ['"family":"IPv6"', '"port":30080', '"reason":"in use"'])
        assert.ok(lines[0]!.includes(piece), `${format}: ${piece} in ${lines[0]}`);
    }
  });

  test('callerOf skips pino and the logger module, as TypeScript in a checkout and as the installed JavaScript', () => {
    const pino = [
      { file: '/app/node_modules/pino/lib/proto.js', line: 200 },
      { file: '/app/node_modules/pino/lib/tools.js', line: 60 },
    ];
    const checkout = 'file:///app/src/cli/logger.ts';
    assert.equal(
      callerOf(
        [{ file: checkout, line: 50 }, ...pino, { file: 'file:///app/src/sync/sync-loop.ts', line: 123 }],
        checkout,
      ),
      'sync/sync-loop.ts:123',
    );
    // The package runs the compiled modules: its log lines named cli/logger.js:12 as every caller.
    const installed = 'file:///usr/lib/kproxy/src/cli/logger.js';
    assert.equal(
      callerOf(
        [
          { file: installed, line: 12 },
          ...pino,
          { file: 'file:///usr/lib/kproxy/src/sync/sync-log.js', line: 9 },
        ],
        installed,
      ),
      'sync/sync-log.js:9',
    );
    assert.equal(callerOf([{ file: installed, line: 12 }, ...pino], installed), '???:1');
  });
});
