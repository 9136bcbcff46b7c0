// The daemon's drift report between an integrity check and its repair (src/daemon/drift-watch.ts),
// on the sync loop's events: what the gauge, the counter and the log say when the comparison
// finds pieces of several Service ports, and when it cannot run (the packaged unit allows no
// scratch namespace: unshare is refused). The kernel side: drift-netns.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { DualStackState } from '../../contract/proxy-state.ts';
import type { DriftReader, DriftReport } from '../../dataplanes/shared/drift/drift-report.ts';
import { DriftWatch } from '../../src/daemon/drift-watch.ts';
import type { Syncer, SyncLoopEvent } from '../../src/sync/sync-loop.ts';
import { capturedLogger } from '../support/captured-logger.ts';

const STATE: DualStackState = {};
const damaged: Syncer = {
  intact: async () => false,
  sync: async () => ({ kind: 'full', objectCount: 0, conntrack: [] }),
};
const synced: SyncLoopEvent = {
  type: 'synced',
  requested: 'full',
  reason: 'drift',
  outcome: { kind: 'full', objectCount: 0, conntrack: [] },
  startedAt: 0,
  durationMs: 1,
};

async function metricValues(registry: Registry): Promise<Record<string, number>> {
  const values: Record<string, number> = {};
  for (const metric of await registry.getMetricsAsJSON())
    for (const { labels, value } of metric.values)
      values[`${metric.name}${labels.kind === undefined ? '' : `{${labels.kind}}`}`] = value;
  return values;
}

function watch(read: DriftReader) {
  const registry = new Registry();
  const { logger, lines } = capturedLogger();
  const drift = new DriftWatch({ mode: 'nftables', read, registry, logger });
  return { drift, registry, lines, syncer: drift.watching(damaged, () => STATE) };
}

describe('daemon drift watch', () => {
  test('pieces of two Service ports: the gauge by kind, one repair, one line per port after it', async () => {
    const report: DriftReport = {
      mode: 'nftables',
      pieces: [
        { kind: 'missing', service: 'default/web:80/TCP', where: 'ip kproxy map backends-tcp', text: 'a' },
        {
          kind: 'different',
          service: 'default/web:80/TCP',
          where: 'ip kproxy map backends-tcp',
          text: 'b',
          expected: 'c',
        },
        { kind: 'missing', service: '(node-wide)', where: 'ip kproxy chain services', text: 'd' },
      ],
      foreign: [
        { where: 'ip guard chain pre (prerouting)', text: 'drop', hits: ['default/web:80/TCP'] },
        { where: 'ip guard chain pre (prerouting)', text: 'accept', hits: [] },
      ],
      unreadable: [],
    };
    let compared: DualStackState | undefined;
    const w = watch(async (state) => {
      compared = state;
      return report;
    });
    assert.equal(await w.syncer.intact(), false);
    assert.equal(compared, STATE, 'the state last synced is compared');
    assert.equal(w.lines.length, 0, 'nothing is said before the repair');
    const found = await metricValues(w.registry);
    assert.equal(found['kproxy_sync_proxy_rules_drift{missing}'], 2);
    assert.equal(found['kproxy_sync_proxy_rules_drift{different}'], 1);
    assert.equal(found.kproxy_sync_proxy_rules_drift_repairs_total, 0);

    w.drift.observe(synced);
    assert.deepEqual(
      w.lines.map((l) => [l.msg, l.service, l.repaired ?? l.rule]),
      [
        [
          'repaired drifted rules',
          'default/web:80/TCP',
          [
            'missing in ip kproxy map backends-tcp: a',
            'different in ip kproxy map backends-tcp: b (kproxy holds c)',
          ],
        ],
        ['repaired drifted rules', '(node-wide)', ['missing in ip kproxy chain services: d']],
        [
          "a rule of another owner drops or rejects Service packets; not kproxy's to repair",
          undefined,
          'drop',
        ],
      ],
    );
    assert.equal((await metricValues(w.registry)).kproxy_sync_proxy_rules_drift_repairs_total, 1);
    w.drift.observe(synced);
    assert.equal(
      (await metricValues(w.registry)).kproxy_sync_proxy_rules_drift_repairs_total,
      1,
      'a sync without damage found before it repairs nothing',
    );
    w.drift.observe({ type: 'checked', at: 2 });
    assert.equal((await metricValues(w.registry))['kproxy_sync_proxy_rules_drift{missing}'], 0);
  });

  test('a comparison that fails: the repair counted and logged with why its pieces are unknown', async () => {
    const w = watch(async () => {
      throw new Error(
        'loading the render into a scratch namespace: unshare: unshare failed: Operation not permitted',
      );
    });
    assert.equal(await w.syncer.intact(), false, 'the repair still runs');
    w.drift.observe(synced);
    assert.deepEqual(
      w.lines.map((l) => [l.msg, l.reason]),
      [
        [
          'repaired rules the integrity check found damaged',
          'the comparison failed: loading the render into a scratch namespace: unshare: unshare failed: Operation not permitted',
        ],
      ],
    );
    const values = await metricValues(w.registry);
    assert.equal(values.kproxy_sync_proxy_rules_drift_repairs_total, 1);
    assert.equal(values['kproxy_sync_proxy_rules_drift{missing}'], 0);
  });
});
