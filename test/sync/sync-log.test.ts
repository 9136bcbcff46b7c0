import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CommandTimeoutError } from '../../contract/dataplane-error.ts';
import { NftError } from '../../dataplanes/nftables/nft-error.ts';
import { logSyncEvent } from '../../src/sync/sync-log.ts';
import type { SyncLoopEvent } from '../../src/sync/sync-loop.ts';
import { capturedLogger } from '../support/captured-logger.ts';

const failed = (error: unknown): SyncLoopEvent => ({
  type: 'failed',
  requested: 'incremental',
  reason: 'change',
  error,
  startedAt: 1_000,
  durationMs: 12,
  retryInMs: 1_000,
});

const summary = { servicePorts: 3, endpoints: 7 };

describe('logSyncEvent', () => {
  test('a sync the kernel refused, or a command that timed out, is logged at error as a failure to retry', () => {
    const { logger, lines } = capturedLogger();
    logSyncEvent(
      logger,
      failed(new NftError('-f', 'Error: Could not process rule: No such file or directory')),
      summary,
    );
    logSyncEvent(logger, failed(new CommandTimeoutError('nft', 120_000)), summary);
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg]),
      [
        [50, 'sync failed; retrying with a full sync'],
        [50, 'sync failed; retrying with a full sync'],
      ],
    );
    assert.match(
      String((lines[0]?.err as { message?: string } | undefined)?.message),
      /No such file or directory/,
    );
  });

  test('any other error is logged at error as a bug in kproxy, with its stack', () => {
    const { logger, lines } = capturedLogger();
    logSyncEvent(
      logger,
      failed(new TypeError("Cannot read properties of undefined (reading 'key')")),
      summary,
    );
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.level, 50);
    assert.match(String(lines[0]?.msg), /^sync failed on a bug in kproxy/);
    assert.match(
      String((lines[0]?.err as { stack?: string } | undefined)?.stack),
      /^TypeError: Cannot read properties[^\n]*\n\s+at /,
    );
  });

  test('a sync is one info line with what ran and what the state holds', () => {
    const { logger, lines } = capturedLogger();
    logSyncEvent(
      logger,
      {
        type: 'synced',
        requested: 'incremental',
        reason: 'change',
        outcome: {
          kind: 'full',
          objectCount: 40,
          conntrack: [
            { family: 'IPv4', deleted: 2, durationMs: 1, unparsed: 0 },
            { family: 'IPv6', deleted: 1, durationMs: 1, unparsed: 0 },
          ],
        },
        startedAt: 1_000,
        durationMs: 5,
      },
      summary,
    );
    assert.deepEqual(
      lines.map(({ level, msg, kind, requested, servicePorts, endpoints, objects, conntrackDeleted }) => ({
        level,
        msg,
        kind,
        requested,
        servicePorts,
        endpoints,
        objects,
        conntrackDeleted,
      })),
      [
        {
          level: 30,
          msg: 'rules synced',
          kind: 'full',
          requested: 'incremental',
          servicePorts: 3,
          endpoints: 7,
          objects: 40,
          conntrackDeleted: 3,
        },
      ],
    );
  });
});
