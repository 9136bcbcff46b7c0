import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type BenchRow, benchRows, formatTable } from '../../bench/report.ts';

describe('bench report', () => {
  it('judges ratios against the bare kernel figure and absolute figures against their bound', () => {
    const rows = benchRows({
      nftables: {
        services: 30000,
        coldStartMs: 6000,
        bareLoadMs: 5500,
        endpointChangeMedianMs: 25,
        rssAfterSyncMiB: 600,
        rssSettledMiB: 120,
      },
      daemon: { services: 30000, rssMiB: 140, peakRssMiB: 400 },
      iptables: {
        services: 10000,
        fullSyncMs: 30000,
        bareFullRestoreMs: 20000,
        partialSyncMs: 400,
        bareChangedChainsRestoreMs: 380,
      },
    });
    const verdict = (prefix: string) => rows.find((r) => r.what.startsWith(prefix))?.ok;
    assert.equal(verdict('nft text: cold start vs bare'), true); // 1.09×
    assert.equal(verdict('nft text: one endpoint change'), false); // 25 ms ≥ 20 ms
    assert.equal(verdict('daemon: kproxy run RSS settled'), true); // judged settled, not at the peak
    assert.equal(verdict('nft: RSS settled'), undefined, "the bench process's RSS is only information");
    assert.equal(verdict('iptables: full sync'), false); // 1.5×
    assert.equal(verdict('iptables: partial sync'), true); // 1.05×
    assert.match(
      rows.find((r) => r.what.startsWith('iptables: full'))!.measured,
      /^1\.50× \(30\.00 s vs 20\.00 s\)$/,
    );
  });

  it("judges issue 33's iptables targets on the curve's points: connect latency at the largest size, the wide Service's change", () => {
    const size = (services: number, first: number, last: number) => ({
      services,
      endpointsPerService: 10,
      connectFirstServiceUs: first,
      connectLastServiceUs: last,
    });
    const wide = {
      services: 1,
      endpointsPerService: 100000,
      wide: true,
      partialSyncMs: 5350,
      bareChangedChainsRestoreMs: 2000,
    };
    const rows = benchRows({
      iptables: {
        services: 10000,
        sizes: [size(1000, 50, 60), size(30000, 24, 518), size(10000, 50, 51), wide],
      },
    });
    const connect = rows.find((r) => r.what.startsWith('iptables: connect latency'))!;
    assert.equal(connect.what, 'iptables: connect latency, last vs first of 30,000 services');
    assert.match(connect.measured, /^21\.58× \(518 µs vs 24 µs\)$/);
    assert.equal(connect.ok, false); // > 1.3×
    const change = rows.find((r) => r.what.startsWith('iptables: one change of 1 Service'))!;
    assert.equal(
      change.what,
      'iptables: one change of 1 Service × 100,000 endpoints vs its changed chains only',
    );
    assert.equal(change.ok, false); // 2.68× > 1×
    const flat = benchRows({ iptables: { sizes: [size(30000, 53, 55), { ...wide, partialSyncMs: 1900 }] } });
    assert.equal(flat.find((r) => r.what.startsWith('iptables: connect latency'))!.ok, true);
    assert.equal(flat.find((r) => r.what.startsWith('iptables: one change of 1 Service'))!.ok, true);
  });

  it('judges nftables as the daemon runs it (elements by netlink), and says which path the elements took', () => {
    const nftables = {
      services: 30000,
      endpointChangeRuns: 21,
      bareLoadMs: 8000,
      coldStartMs: 9000,
      endpointChangeMedianMs: 2.2,
      endpointChangeToolMedianMs: 1.4,
      netlinkColdStartMs: 2400,
      netlinkKernelFloorMs: 1500,
      netlinkColdStartElements: 330_000,
      netlinkColdStartNftElements: 0,
      netlinkEndpointChangeMedianMs: 0.45,
      netlinkEndpointChangeTransactionMedianMs: 0.2,
      netlinkEndpointChangesByNft: 0,
    };
    const rows = benchRows({ nftables });
    const row = (prefix: string) => rows.find((r) => r.what.startsWith(prefix));
    assert.match(row('nft: cold start (state → rules, elements by netlink)')!.measured, /^2\.40 s$/);
    const cold = rows[rows.indexOf(row('nft: cold start (state')!) + 1]!;
    assert.match(cold.what, /^nft: \.\.\. vs bare nft -f/);
    assert.match(cold.measured, /^0\.30× \(2\.40 s vs 8\.00 s\)$/);
    assert.equal(cold.ok, true); // ≤ 0.5×
    const floor = rows[rows.indexOf(cold) + 1]!;
    assert.equal(floor.what, "nft: ... vs the kernel's floor (its steps again, bare)");
    assert.match(floor.measured, /^1\.60× \(2\.40 s vs 1\.50 s\)$/);
    assert.equal(floor.ok, false); // > 1.5×
    assert.equal(row('nft: one endpoint change end to end, elements by netlink')?.ok, true); // < 0.5 ms
    assert.match(row('nft: ... vs its element batch')!.measured, /^2\.25× \(0\.45 ms vs 0\.20 ms\)$/);
    assert.equal(row('nft: ... elements nft wrote')!.measured, 'cold start 0 of 330,000; 0 of 21 changes');
    assert.equal(row('nft text: cold start vs bare')?.ok, true); // 1.13× ≤ 1.2×
    // A batch over one datagram: its transaction went to nft, and the row says so.
    const fallback = benchRows({
      nftables: {
        ...nftables,
        netlinkColdStartElements: 1,
        netlinkColdStartNftElements: 133_337,
        netlinkEndpointChangesByNft: 21,
      },
    });
    assert.equal(
      fallback.find((r) => r.what.startsWith('nft: ... elements nft wrote'))!.measured,
      'cold start 133,337 of 133,338; 21 of 21 changes',
    );
  });

  it('gives the IPVS section (measured in the emulated VM) as ratios: one cold-sync row per size and the wide Service', () => {
    const wide = {
      services: 1,
      endpointsPerService: 100_000,
      wide: true,
      coldSyncMs: 70000,
      bareLoadMs: 80000,
      endpointChangeMedianMs: 300,
      bareNetlinkCallMedianMs: 2,
    };
    const rows = benchRows({
      ipvs: {
        sizes: [
          { services: 10000, endpointsPerService: 10, wide: false, coldSyncMs: 60000, bareLoadMs: 50000 },
          { services: 30000, endpointsPerService: 10, wide: false, coldSyncMs: 200000, bareLoadMs: 150000 },
          wide,
        ],
        endpointChangeMedianMs: 40,
        bareNetlinkCallMedianMs: 0.5,
        connectFirstServiceUs: 900,
        connectLastServiceUs: 950,
        affinityServices: 3000,
        coldSyncPlainMs: 20000,
        coldSyncAffinityMs: 21000,
      },
    });
    const row = (prefix: string) => rows.find((r) => r.what.startsWith(prefix));
    assert.equal(row('ipvs (VM): cold sync vs bare ip + ipvsadm --restore + nft -f, 10,000')?.ok, true);
    assert.equal(row('ipvs (VM): cold sync vs bare ip + ipvsadm --restore + nft -f, 30,000')?.ok, false);
    const wideSync = row('ipvs (VM): cold sync vs bare ip + ipvsadm --restore + nft -f, 1 Service × 100,000');
    assert.equal(wideSync?.measured, '0.88× (70.00 s vs 80.00 s)', "the wide Service's own figures");
    assert.equal(wideSync?.ok, true);
    const change = row('ipvs (VM): one endpoint change');
    assert.equal(change?.ok, undefined, 'a ratio for context: a netlink call is not a sync');
    assert.match(change!.measured, /^80\.00× \(40\.0 ms vs 0\.50 ms\)$/);
    assert.deepEqual(row('ipvs (VM): ... the same, 1 Service × 100,000 endpoints'), {
      what: 'ipvs (VM): ... the same, 1 Service × 100,000 endpoints',
      measured: '150.00× (300.0 ms vs 2.00 ms)',
      target: '',
      ok: undefined,
    });
    assert.equal(row('ipvs (VM): connect latency')?.ok, true);
    assert.equal(row('ipvs (VM): 3,000 ClientIP services')?.ok, true);
    // Without a wide point, no row for one.
    const narrow = benchRows({ ipvs: { sizes: [wide].map((w) => ({ ...w, wide: false })) } });
    assert.equal(narrow.filter((r) => r.what.includes('1 Service')).length, 0);
  });

  it("judges the daemon's first sync against the bare list plus the bare nft -f of the same cluster", () => {
    const firstSync = (daemon: Record<string, number>, nftables: Record<string, number>) =>
      benchRows({ daemon, nftables }).find((r) => r.what.startsWith('daemon: time to first sync'));
    const row = firstSync(
      { services: 30000, timeToFirstSyncSeconds: 13, bareListSeconds: 2 },
      { services: 30000, bareLoadMs: 8000 },
    );
    assert.equal(row?.ok, true); // 13 s ≤ 1.3 × (2 + 8) s
    assert.match(row!.measured, /^1\.30× \(13\.0 s vs 10\.0 s\)$/);
    assert.equal(
      firstSync(
        { services: 30000, timeToFirstSyncSeconds: 14, bareListSeconds: 2 },
        { services: 30000, bareLoadMs: 8000 },
      )?.ok,
      false,
    );
    assert.equal(
      firstSync(
        { services: 30000, timeToFirstSyncSeconds: 13, bareListSeconds: 2 },
        { services: 10000, bareLoadMs: 3000 },
      ),
      undefined,
      'a floor from another cluster size is no floor',
    );
  });

  it("judges churn's p99 against 100 ms", () => {
    const churn = {
      services: 10000,
      perSecond: 10,
      seconds: 60,
      churnP99Ms: 120,
      churnP50Ms: 8,
      churnMaxMs: 300,
    };
    const row = (rows: BenchRow[]) => rows.find((r) => r.what.startsWith('churn: network programming p99'));
    assert.equal(row(benchRows({ churn }))?.ok, false); // 120 ms ≥ 100 ms
    assert.equal(row(benchRows({ churn: { ...churn, churnP99Ms: 60 } }))?.ok, true);
  });

  it('judges the rollout per mode: nftables p99 < 20 ms, iptables p99 ≤ 2× its mean sync, nothing lost, /healthz', () => {
    const run = {
      services: 30000,
      rolling: 1000,
      perSecond: 1000,
      seconds: 60,
      minSyncPeriod: '1ms',
      churnChanges: 60000,
      churnMissed: 0,
      churnP50Ms: 6,
      churnP99Ms: 18,
      churnMaxMs: 40,
      finalMismatches: 0,
      healthzP99Ms: 30,
      syncsDuringChurn: 5000,
      syncMeanMs: 8,
    };
    const rows = (rollout: NonNullable<Parameters<typeof benchRows>[0]['rollout']>) =>
      benchRows({ rollout })
        .filter((r) => r.ok !== undefined)
        .map((r) => [r.what.replace(/,.*/, ''), r.ok]);
    assert.deepEqual(rows({ nftables: { ...run, mode: 'nftables' } }), [
      ['rollout (nftables): network programming p99', true],
      ['rollout (nftables): writes never seen in the kernel / Services whose final endpoints differ', true],
      ['rollout (nftables): /healthz p99 during the churn', true],
    ]);
    const iptables = { ...run, mode: 'iptables', churnP99Ms: 2500, syncMeanMs: 1000, finalMismatches: 1 };
    assert.deepEqual(rows({ nftables: { ...run, mode: 'nftables', churnP99Ms: 25 }, iptables }), [
      ['rollout (nftables): network programming p99', false],
      ['rollout (nftables): writes never seen in the kernel / Services whose final endpoints differ', true],
      ['rollout (nftables): /healthz p99 during the churn', true],
      ["rollout (iptables): network programming p99 vs the run's mean sync", false],
      ['rollout (iptables): writes never seen in the kernel / Services whose final endpoints differ', false],
      ['rollout (iptables): /healthz p99 during the churn', true],
    ]);
  });

  it("gives kube-proxy's shape as ratios over kproxy's daemon path (elements by netlink) and its iptables syncs of the same cluster", () => {
    // Every figure distinct, so a row that read a swapped figure would show another ratio.
    const shape = {
      services: 10000,
      endpointsPerService: 10,
      chunkServices: 1000,
      kproxyNetlinkColdStartMs: 1500,
      kproxyNetlinkColdStartElements: 110_000,
      kproxyNetlinkColdStartNftElements: 0,
      kproxyNftTextColdStartMs: 6000,
      nftOneTransactionMs: 150000,
      nftChunkedMs: 36000,
      iptFullRestoreMs: 21000,
      iptPartialSyncRestoreMs: 1600,
      iptServiceChainsRestoreMs: 600,
    };
    const iptables = { services: 10000, endpointsPerService: 10, fullSyncMs: 28000, partialSyncMs: 400 };
    const rows = benchRows({ kubeproxyshape: shape, iptables }).filter((r) =>
      r.what.startsWith('kube-proxy shape'),
    );
    assert.deepEqual(
      rows.map((r) => [r.what, r.measured]),
      [
        [
          "kube-proxy shape, 10,000: its nft full sync (one transaction) vs kproxy's cold start (elements by netlink)",
          '100.00× (150.00 s vs 1.50 s)',
        ],
        ['kube-proxy shape: ... the same in 1,000-service transactions', '24.00× (36.00 s vs 1.50 s)'],
        [
          "kube-proxy shape: ... elements nft wrote in kproxy's cold start (the writer's fallback)",
          '0 of 110,000',
        ],
        [
          "kube-proxy shape: nft text: its one transaction vs kproxy's cold start in nft text",
          '25.00× (150.00 s vs 6.00 s)',
        ],
        ["kube-proxy shape: iptables-nft full restore vs kproxy's full sync", '0.75× (21.00 s vs 28.00 s)'],
        ["kube-proxy shape: its partial sync restore vs kproxy's partial sync", '4.00× (1.60 s vs 400.0 ms)'],
        [
          "kube-proxy shape: ... only the service's chains vs kproxy's partial sync",
          '1.50× (600.0 ms vs 400.0 ms)',
        ],
      ],
    );
    assert.ok(
      rows.every((r) => r.ok === undefined),
      'ratios for context, without a target',
    );
    // The writer's fallback took part of the cold start: the row says how much of it.
    const fallback = benchRows({
      kubeproxyshape: {
        ...shape,
        kproxyNetlinkColdStartElements: 10_000,
        kproxyNetlinkColdStartNftElements: 100_000,
      },
    });
    assert.equal(
      fallback.find((r) => r.what.includes('elements nft wrote in kproxy'))!.measured,
      '100,000 of 110,000',
    );
    // The iptables section on another cluster: no iptables ratio rather than a wrong one.
    const iptablesRows = (other: Record<string, unknown>) =>
      benchRows({ kubeproxyshape: shape, iptables: { ...iptables, ...other } }).filter((r) =>
        /iptables|partial sync|service's chains/.test(r.what),
      );
    assert.equal(iptablesRows({}).length, 3);
    assert.equal(iptablesRows({ services: 30000 }).length, 0, 'another size');
    assert.equal(iptablesRows({ endpointsPerService: 20 }).length, 0, 'other endpoints per service');
    assert.equal(iptablesRows({ affinity: true }).length, 0, 'ClientIP affinity on every service');
  });

  it('leaves out what a section did not measure, and marks missed targets in the table', () => {
    const rows = benchRows({ informer: { services: 30000, heapAfterMiB: 120 } });
    assert.equal(rows.length, 1);
    const table = formatTable(rows);
    assert.match(table, /informers: heap with 30,000 services.*120\.0 MiB.*< 100 MiB.*MISSED/);
  });
});
