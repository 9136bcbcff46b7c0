import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { benchRows, formatTable } from '../../bench/report.ts';

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

  it('judges nftables as the daemon runs it (elements by netlink), and says which path the elements took', () => {
    const nftables = {
      services: 30000,
      endpointChangeRuns: 21,
      bareLoadMs: 8000,
      coldStartMs: 9000,
      endpointChangeMedianMs: 2.2,
      endpointChangeToolMedianMs: 1.4,
      netlinkColdStartMs: 2400,
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

  it('gives the IPVS section (measured in the emulated VM) as ratios: one cold-sync row per size', () => {
    const rows = benchRows({
      ipvs: {
        sizes: [
          { services: 10000, coldSyncMs: 60000, bareLoadMs: 50000 },
          { services: 30000, coldSyncMs: 200000, bareLoadMs: 150000 },
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
    const change = row('ipvs (VM): one endpoint change');
    assert.equal(change?.ok, undefined, 'a ratio for context: a netlink call is not a sync');
    assert.match(change!.measured, /^80\.00× \(40\.0 ms vs 0\.50 ms\)$/);
    assert.equal(row('ipvs (VM): connect latency')?.ok, true);
    assert.equal(row('ipvs (VM): 3,000 ClientIP services')?.ok, true);
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

  it("judges churn's p99 against 100 ms, and gives kube-proxy's shape as ratios over kproxy's figures of the same size", () => {
    const shape = {
      services: 10000,
      chunkServices: 1000,
      kproxyColdStartMs: 2000,
      nftOneTransactionMs: 150000,
      nftChunkedMs: 36000,
      iptFullRestoreMs: 21000,
      iptPartialSyncRestoreMs: 1600,
      iptServiceChainsRestoreMs: 400,
    };
    const churn = {
      services: 10000,
      perSecond: 10,
      seconds: 60,
      churnP99Ms: 120,
      churnP50Ms: 8,
      churnMaxMs: 300,
    };
    const rows = benchRows({
      kubeproxyshape: shape,
      iptables: { services: 10000, fullSyncMs: 28000, partialSyncMs: 400 },
      churn,
    });
    const row = (prefix: string) => rows.find((r) => r.what.startsWith(prefix));
    assert.match(
      row('kube-proxy shape, 10,000: its nft full sync')!.measured,
      /^75\.00× \(150\.00 s vs 2\.00 s\)$/,
    );
    assert.equal(row('kube-proxy shape, 10,000: its nft full sync')!.ok, undefined, 'a ratio for context');
    assert.match(row('kube-proxy shape: iptables-nft full restore')!.measured, /^0\.75× /);
    assert.match(row('kube-proxy shape: its partial sync restore')!.measured, /^4\.00× /);
    assert.equal(row('churn: network programming p99')?.ok, false); // 120 ms ≥ 100 ms
    assert.equal(
      benchRows({ churn: { ...churn, churnP99Ms: 60 } }).find((r) => r.what.startsWith('churn: network'))?.ok,
      true,
    );
    // The iptables section at another size: no iptables ratio rather than a wrong one.
    const apart = benchRows({
      kubeproxyshape: shape,
      iptables: { services: 30000, fullSyncMs: 9e5, partialSyncMs: 900 },
    });
    assert.equal(apart.filter((r) => r.what.startsWith('kube-proxy shape')).length, 2);
  });

  it('leaves out what a section did not measure, and marks missed targets in the table', () => {
    const rows = benchRows({ informer: { services: 30000, heapAfterMiB: 120 } });
    assert.equal(rows.length, 1);
    const table = formatTable(rows);
    assert.match(table, /informers: heap with 30,000 services.*120\.0 MiB.*< 100 MiB.*MISSED/);
  });
});
