// The daemon's log line for each sync loop event. A failed sync says whether the kernel refused a
// change (a DataplaneError: retried, nothing to fix in kproxy) or kproxy hit a bug (anything else:
// its stack is logged, so that it can be reported and fixed).
import type { Logger } from 'pino';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { SyncLoopEvent } from './sync-loop.ts';
import type { StateSummary } from './sync-step.ts';

export function logSyncEvent(logger: Logger, event: SyncLoopEvent, summary: StateSummary): void {
  switch (event.type) {
    case 'synced':
      logger.info(
        {
          kind: event.outcome.kind,
          requested: event.requested,
          reason: event.reason,
          durationMs: event.durationMs,
          servicePorts: summary.servicePorts,
          endpoints: summary.endpoints,
          objects: event.outcome.objectCount,
          conntrackDeleted: event.outcome.conntrack.reduce((sum, r) => sum + r.deleted, 0),
        },
        'rules synced',
      );
      return;
    case 'failed':
      logger.error(
        {
          requested: event.requested,
          reason: event.reason,
          durationMs: event.durationMs,
          retryInMs: event.retryInMs,
          err: event.error,
        },
        event.error instanceof DataplaneError
          ? 'sync failed; retrying with a full sync'
          : 'sync failed on a bug in kproxy (please report it with this line); retrying with a full sync',
      );
      return;
    case 'checked':
      logger.debug('periodic check: rules intact');
      return;
    case 'queued':
      return;
  }
}
