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
    assert.equal(verdict('nft: cold start vs bare'), true); // 1.09×
    assert.equal(verdict('nft: one endpoint change'), false); // 25 ms ≥ 20 ms
    assert.equal(verdict('daemon: kproxy run RSS settled'), true); // judged settled, not at the peak
    assert.equal(verdict('nft: RSS settled'), undefined, "the bench process's RSS is only information");
    assert.equal(verdict('iptables: full sync'), false); // 1.5×
    assert.equal(verdict('iptables: partial sync'), true); // 1.05×
    assert.match(
      rows.find((r) => r.what.startsWith('iptables: full'))!.measured,
      /^1\.50× \(30\.00 s vs 20\.00 s\)$/,
    );
  });

  it('leaves out what a section did not measure, and marks missed targets in the table', () => {
    const rows = benchRows({ informer: { services: 30000, heapAfterMiB: 120 } });
    assert.equal(rows.length, 1);
    const table = formatTable(rows);
    assert.match(table, /informers: heap with 30,000 services.*120\.0 MiB.*< 100 MiB.*MISSED/);
  });
});
