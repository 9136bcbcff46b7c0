// The informers' counters, registered in the Registry the daemon passes in (never the global one).

import { Counter, type Registry } from 'prom-client';

export interface InformerMetrics {
  /** Full lists (or watch-lists) of a resource; reason: initial, expired. */
  readonly relists: Counter<'resource' | 'reason'>;
  /** Watches started again after the previous one ended; reason: closed, error. */
  readonly watchRestarts: Counter<'resource' | 'reason'>;
  /** Watch events received; type: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR. */
  readonly events: Counter<'resource' | 'type'>;
  /** Failures; reason: network, throttled, server, expired, unauthorized, client, decode, malformed, invalid. */
  readonly errors: Counter<'resource' | 'reason'>;
}

export function createInformerMetrics(registry: Registry): InformerMetrics {
  const registers = [registry];
  return {
    relists: new Counter({
      name: 'kproxy_informer_relists_total',
      help: 'Full lists (or watch-lists) of a resource started, initially or after the watch history expired.',
      labelNames: ['resource', 'reason'],
      registers,
    }),
    watchRestarts: new Counter({
      name: 'kproxy_informer_watch_restarts_total',
      help: 'Watches restarted after the previous one closed or failed.',
      labelNames: ['resource', 'reason'],
      registers,
    }),
    events: new Counter({
      name: 'kproxy_informer_events_total',
      help: 'Watch events received, by event type.',
      labelNames: ['resource', 'type'],
      registers,
    }),
    errors: new Counter({
      name: 'kproxy_informer_errors_total',
      help: 'Informer failures: API errors, malformed watch lines, invalid objects.',
      labelNames: ['resource', 'reason'],
      registers,
    }),
  };
}
