// The daemon's drift report between an integrity check and its repair (src/daemon/drift-watch.ts),
// on the sync loop's events: what the gauge, the counter and the log say when the comparison
// finds pieces of several Service ports, and when it cannot run. Then the iptables mode's check
// and comparison on a real kernel as the packaged unit runs them, without CAP_SYS_ADMIN, so that
// unshare is refused (the comparison once restored the render into a scratch namespace, and there
// reported nothing). The daemon on the kernel: drift-netns.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { iptablesDriftReader } from '../../dataplanes/iptables/drift.ts';
import { IptablesDataplane } from '../../dataplanes/iptables/live.ts';
import { execaRunner } from '../../dataplanes/shared/command-runner.ts';
import type { DriftReader, DriftReport } from '../../dataplanes/shared/drift/drift-report.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { DriftWatch } from '../../src/daemon/drift-watch.ts';
import type { Syncer, SyncLoopEvent } from '../../src/sync/sync-loop.ts';
import { SCENARIOS } from '../dataplanes/iptables/scenarios.ts';
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

function watch(read: DriftReader, syncer = damaged, state = STATE, mode: DataplaneMode = 'nftables') {
  const registry = new Registry();
  const { logger, lines } = capturedLogger();
  const drift = new DriftWatch({ mode, read, registry, logger });
  return { drift, registry, lines, syncer: drift.watching(syncer, () => state) };
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
    const refusal =
      'iptables-nft-save: Could not fetch rule set generation id: Permission denied (you must be root)';
    const w = watch(async () => {
      throw new Error(refusal);
    });
    assert.equal(await w.syncer.intact(), false, 'the repair still runs');
    w.drift.observe(synced);
    assert.deepEqual(
      w.lines.map((l) => [l.msg, l.reason]),
      [['repaired rules the integrity check found damaged', `the comparison failed: ${refusal}`]],
    );
    const values = await metricValues(w.registry);
    assert.equal(values.kproxy_sync_proxy_rules_drift_repairs_total, 1);
    assert.equal(values['kproxy_sync_proxy_rules_drift{missing}'], 0);
  });

  test('iptables without CAP_SYS_ADMIN (unshare refused, as under the packaged unit): a flushed chain is in the gauge and the log', async (t) => {
    if (!requireRoot(t, 'a network namespace and iptables')) return;
    const lab = new Lab('drift-watch');
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // Every command as the unit runs it: no CAP_SYS_ADMIN, in this process' children or theirs.
    const runner = execaRunner(['ip', 'netns', 'exec', ns, 'setpriv', '--bounding-set', '-sys_admin', '--']);
    const scratch = await runner.run('unshare', ['--net', 'true']);
    assert.match(scratch.stderr, /unshare failed: Operation not permitted/, 'no scratch namespace here');
    const state = SCENARIOS['cluster-ip']!;
    const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
    await dataplane.start();
    await dataplane.sync(state, 'full');
    const saved = await lab.exec(ns, 'iptables-nft-save', ['-t', 'nat']);
    const chain = /^-A (KPROXY-SVC-\S+) .*--comment "ns1\/web:80\/TCP cluster IP"/m.exec(saved.stdout)![1]!;
    const flushed = saved.stdout.split('\n').filter((line) => line.startsWith(`-A ${chain} `)).length;
    await lab.exec(ns, 'iptables-nft', ['-t', 'nat', '-F', chain]);

    const w = watch(
      iptablesDriftReader(runner),
      { intact: () => dataplane.intact(), sync: (kind) => dataplane.sync(state, kind) },
      state,
      'iptables',
    );
    // The check reads the tables in the background and reports what it read at its next call.
    assert.equal(await dataplane.intact(), true);
    await dataplane.settled();
    assert.equal(await w.syncer.intact(), false, 'the integrity check finds the flushed chain');
    const found = await metricValues(w.registry);
    assert.equal(found['kproxy_sync_proxy_rules_drift{missing}'], flushed, 'each flushed rule is missing');
    assert.equal(found['kproxy_sync_proxy_rules_drift{extra}'], 0);
    assert.equal(found['kproxy_sync_proxy_rules_drift{different}'], 0);

    await w.syncer.sync('full');
    w.drift.observe(synced);
    assert.deepEqual(
      w.lines.map((l) => [l.msg, l.service]),
      [['repaired drifted rules', 'ns1/web:80/TCP']],
    );
    const repaired = w.lines[0]!.repaired as string[];
    assert.equal(repaired.length, flushed);
    for (const piece of repaired) assert.ok(piece.startsWith(`missing in IPv4 nat chain ${chain}: `), piece);
    assert.equal(await dataplane.intact(), true);
    await dataplane.settled();
    assert.equal(await dataplane.intact(), true, 'repaired');
  });
});
