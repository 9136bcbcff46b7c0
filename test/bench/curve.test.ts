import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { curveFailures, curveFallbacks, curvePoints, curveSvg, formatCurveTable } from '../../bench/curve.ts';

/** A run of the nftables section: the daemon's path (netlink) and, slower, the nft-text path. */
const nft = (services: number, netlinkColdStartMs: number, bareLoadMs: number) => ({
  services,
  endpointsPerService: 10,
  wide: false,
  netlinkColdStartMs,
  bareLoadMs,
  netlinkEndpointChangeMedianMs: 0.6,
  netlinkEndpointChangeTransactionMedianMs: 0.3,
  coldStartMs: netlinkColdStartMs * 2,
  endpointChangeMedianMs: 3,
  endpointChangeToolMedianMs: 1.5,
  connectFirstServiceUs: 160,
  connectLastServiceUs: 168,
});
const ipt = (services: number, fullSyncMs: number, bareFullRestoreMs: number) => ({
  services,
  endpointsPerService: 10,
  wide: false,
  fullSyncMs,
  bareFullRestoreMs,
  partialSyncMs: 400,
  bareChangedChainsRestoreMs: 380,
});
// Decades apart on both axes, so that a log scale puts them at equal steps.
const FIGURES = {
  nftables: {
    ...nft(30000, 10_000, 9_000),
    sizes: [
      nft(100, 10, 9),
      nft(1000, 100, 90),
      nft(30000, 10_000, 9_000),
      { ...nft(1, 1000, 900), endpointsPerService: 10_000, wide: true },
    ],
  },
  iptables: { sizes: [ipt(100, 100, 80), ipt(1000, 1000, 800)] },
};

/**
 * The ipvs section as ipvs-speed.ts prints it: the largest size's figures also on top (the table's
 * rows), the change and connect figures at the largest size and for the wide Service.
 */
const IPVS = {
  endpointsPerService: 10,
  services: 10000,
  endpointChangeMedianMs: 40,
  bareNetlinkCallMedianMs: 0.5,
  sizes: [
    {
      services: 10000,
      endpointsPerService: 10,
      wide: false,
      coldSyncMs: 60000,
      bareLoadMs: 50000,
      endpointChangeMedianMs: 40,
      bareNetlinkCallMedianMs: 0.5,
      connectFirstServiceUs: 900,
      connectLastServiceUs: 950,
    },
    { services: 1000, endpointsPerService: 10, wide: false, coldSyncMs: 6000, bareLoadMs: 5000 },
    {
      services: 1,
      endpointsPerService: 100_000,
      wide: true,
      coldSyncMs: 70000,
      bareLoadMs: 80000,
      endpointChangeMedianMs: 300,
      bareNetlinkCallMedianMs: 2,
      connectFirstServiceUs: 1000,
      connectLastServiceUs: 1100,
    },
  ],
};
/** The (x, y) points of one series' polyline in the SVG. */
function series(svg: string, name: string): [number, number][] {
  const group = new RegExp(`<g data-series="${name}">\\n<polyline points="([^"]*)"`).exec(svg);
  assert.ok(group, `series ${name} is drawn`);
  return group[1]!.split(' ').map((pair) => pair.split(',').map(Number) as [number, number]);
}

describe('bench curve', () => {
  it('takes every size of each section, the wide Service last, and ipvs change figures where measured', () => {
    const points = curvePoints({ ...FIGURES, ipvs: IPVS });
    assert.deepEqual(
      points.map((p) => `${p.series} ${p.services}${p.wide ? ' wide' : ''}`),
      [
        'nftables 100',
        'nftables 1000',
        'nftables 30000',
        'nftables 1 wide',
        'nftables-text 100',
        'nftables-text 1000',
        'nftables-text 30000',
        'nftables-text 1 wide',
        'iptables 100',
        'iptables 1000',
        'ipvs 1000',
        'ipvs 10000',
        'ipvs 1 wide',
      ],
    );
    // Each ipvs point its own figures: the wide Service's are not the largest size's, nor swapped.
    assert.deepEqual(
      points
        .filter((p) => p.series === 'ipvs')
        .map((p) => [
          p.services,
          p.endpointsPerService,
          p.coldSyncMs,
          p.bareLoadMs,
          p.changeMs,
          p.bareChangeMs,
          p.connectFirstUs,
          p.connectLastUs,
        ]),
      [
        [1000, 10, 6000, 5000, undefined, undefined, undefined, undefined],
        [10000, 10, 60000, 50000, 40, 0.5, 900, 950],
        [1, 100_000, 70000, 80000, 300, 2, 1000, 1100],
      ],
    );
    assert.equal(points.find((p) => p.series === 'iptables')?.bareChangeMs, 380);
  });

  it('plots nftables as the daemon runs it (elements by netlink), the nft-text path beside it', () => {
    const points = curvePoints(FIGURES);
    const at = (series: string, wide: boolean) =>
      points.find((p) => p.series === series && p.services === (wide ? 1 : 30000) && p.wide === wide)!;
    for (const wide of [false, true]) {
      const daemon = at('nftables', wide);
      assert.equal(daemon.coldSyncMs, wide ? 1000 : 10_000, 'the netlink cold start');
      assert.equal(daemon.bareLoadMs, wide ? 900 : 9_000);
      assert.deepEqual([daemon.changeMs, daemon.bareChangeMs], [0.6, 0.3], 'the netlink change');
      assert.deepEqual([daemon.connectFirstUs, daemon.connectLastUs], [160, 168]);
      const text = at('nftables-text', wide);
      assert.equal(text.coldSyncMs, wide ? 2000 : 20_000, 'the nft-text cold start');
      assert.deepEqual([text.changeMs, text.bareChangeMs], [3, 1.5]);
      assert.equal(text.connectFirstUs, undefined, 'connect latency is once per size, on the main series');
    }
    // Where the writer fell back to nft (a batch over one datagram), the curve says so.
    assert.deepEqual(curveFallbacks(FIGURES), []);
    const wide = {
      ...nft(1, 1000, 900),
      endpointsPerService: 100_000,
      wide: true,
      endpointChangeRuns: 21,
      netlinkColdStartNftElements: 133_337,
      netlinkColdStartOversizeBatches: 1,
      netlinkEndpointChangesByNft: 0,
    };
    assert.deepEqual(curveFallbacks({ nftables: { sizes: [nft(1000, 100, 90), wide] } }), [
      "nftables 1 × 100,000: elements by nft, not netlink (the writer's fallback): 133,337 of the cold start's (1 batch over one datagram), 0 of 21 changes",
    ]);
    // A run without the netlink figures has no daemon point: never the nft-text one in its place.
    const { netlinkColdStartMs: _, ...textOnly } = nft(1000, 100, 90);
    const older = curvePoints({ nftables: { sizes: [textOnly] } });
    assert.deepEqual(
      older.map((p) => p.series),
      ['nftables-text'],
    );
  });

  it('draws each mode as a solid kproxy line and a dashed bare line on log-log axes', () => {
    const svg = curveSvg(curvePoints(FIGURES));
    const kproxy = series(svg, 'nftables-kproxy');
    assert.equal(kproxy.length, 3, 'the N-services sizes are one line; the wide Service is not on it');
    // 100 → 1,000 services and 1,000 → 10,000 ... : x steps proportional to log10 of the sizes.
    const [a, b, c] = kproxy as [[number, number], [number, number], [number, number]];
    assert.ok(Math.abs((c[0] - b[0]) / (b[0] - a[0]) - Math.log10(30)) < 0.01, 'x is log scale');
    // 10 ms → 100 ms → 10 s: equal pixel steps per decade, up the page.
    assert.ok(b[1] < a[1], 'a longer time is higher');
    assert.ok(Math.abs((b[1] - c[1]) / (a[1] - b[1]) - 2) < 0.01, 'y is log scale');
    // The bare line of the same sizes: same x, lower times drawn lower.
    const bare = series(svg, 'nftables-bare');
    assert.deepEqual(
      bare.map(([x]) => x),
      kproxy.map(([x]) => x),
    );
    assert.ok(bare.every(([, y], i) => y > kproxy[i]![1]));
    assert.match(svg, /<g data-series="nftables-bare">\n<polyline [^>]*stroke-dasharray/);
    assert.doesNotMatch(svg, /<g data-series="nftables-kproxy">\n<polyline [^>]*stroke-dasharray/);
    // The wide Service (1 × 10,000) sits at 10,000 endpoints: where 1,000 services × 10 do.
    const wide = /<g data-series="nftables-kproxy-wide">\n<path d="M([\d.]+) /.exec(svg);
    assert.equal(Number(wide?.[1]), b[0]);
    assert.equal(series(svg, 'iptables-kproxy').length, 2);
    assert.equal(series(svg, 'iptables-bare').length, 2);
    assert.doesNotMatch(svg, /data-series="ipvs/, 'no ipvs series when the section did not run');
    // The nft-text path beside it: dotted, at its own (slower) times, with no bare line of its own.
    const text = series(svg, 'nftables-text-kproxy');
    assert.deepEqual(
      text.map(([x]) => x),
      kproxy.map(([x]) => x),
    );
    assert.ok(
      text.every(([, y], i) => y < kproxy[i]![1]),
      'the nft-text times, not the netlink ones',
    );
    assert.match(svg, /<g data-series="nftables-text-kproxy">\n<polyline [^>]*stroke-dasharray="2 3"/);
    assert.doesNotMatch(svg, /data-series="nftables-text-bare/);
    assert.match(svg, /nftables: kproxy cold sync \(netlink\)/);
    assert.match(svg, /nftables, nft text: kproxy cold sync/);
    assert.match(svg, /nftables: bare nft -f/);
    assert.match(svg, /iptables: kproxy cold sync/);
    assert.doesNotMatch(svg, /NaN|undefined|Infinity/);
  });

  it('draws the ipvs wide Service as diamonds at its endpoints, kproxy filled and bare hollow', () => {
    const svg = curveSvg(curvePoints({ ...FIGURES, ipvs: IPVS }));
    const diamond = (group: string) => {
      const m = new RegExp(
        `<g data-series="${group}">\\n<path d="M([\\d.]+) ([\\d.]+)L[^"]*" fill="([^"]+)"`,
      ).exec(svg);
      assert.ok(m, `${group} is drawn`);
      return { x: Number(m[1]), y: Number(m[2]) + 6, fill: m[3] };
    };
    const kproxy = diamond('ipvs-kproxy-wide');
    const bare = diamond('ipvs-bare-wide');
    // 1 × 100,000 sits where 10,000 services × 10 do, off the N-services line.
    const line = series(svg, 'ipvs-kproxy');
    assert.equal(line.length, 2);
    assert.equal(kproxy.x, line[1]![0]);
    assert.equal(bare.x, kproxy.x);
    // kproxy's 70 s below the bare 80 s (y grows down the page), not the largest size's 60 s.
    assert.ok(kproxy.y > bare.y, 'the cold sync and the bare load, not swapped');
    assert.notEqual(kproxy.y, line[1]![1]);
    assert.deepEqual([kproxy.fill, bare.fill], ['#2ca02c', 'white']);
  });

  it('is deterministic, so that the committed chart is the output of its figures', () => {
    const points = curvePoints(FIGURES);
    assert.equal(curveSvg(points), curveSvg(curvePoints(structuredClone(FIGURES))));
    assert.match(curveSvg([]), /no curve measured/);
  });

  it("says which point has no cold sync because kproxy's sync failed", () => {
    const failed = {
      services: 1,
      endpointsPerService: 100_000,
      wide: true,
      bareFullRestoreMs: 60_000,
      fullSyncFailed: 'iptables-nft-restore did not finish within 120 s',
    };
    const figures = { iptables: { sizes: [ipt(1000, 1000, 800), failed] } };
    assert.deepEqual(
      curvePoints(figures).map((p) => p.services),
      [1000],
    );
    assert.deepEqual(curveFailures(figures), [
      "iptables 1 × 100,000: kproxy's sync failed: iptables-nft-restore did not finish within 120 s",
    ]);
    assert.deepEqual(curveFailures(FIGURES), []);
  });

  it('prints one line per point with each figure against its bare baseline', () => {
    const table = formatCurveTable(curvePoints(FIGURES));
    assert.match(
      table,
      /^nftables\s+30,000 × 10\s+1\.11× \(10\.00 s vs 9\.00 s\)\s+2\.00× \(0\.60 ms vs 0\.30 ms\)\s+1\.05× \(168 µs vs 160 µs\)$/m,
    );
    assert.match(table, /^nftables\s+1 × 10,000\s+1\.11×/m);
    assert.match(
      table,
      /^nftables, nft text\s+30,000 × 10\s+2\.22× \(20\.00 s vs 9\.00 s\)\s+2\.00× \(3\.00 ms vs 1\.50 ms\)$/m,
    );
    assert.match(table, /nftables: bare nft -f; its element batch and nft transactions alone/);
    assert.match(
      table,
      /iptables\s+1,000 × 10\s+1\.25× \(1\.00 s vs 800\.0 ms\)\s+1\.05× \(400\.0 ms vs 380\.0 ms\)$/m,
    );
    const ipvs = formatCurveTable(curvePoints({ ipvs: IPVS }));
    assert.match(
      ipvs,
      /^ipvs \(VM\)\s+1 × 100,000\s+0\.88× \(70\.00 s vs 80\.00 s\)\s+150\.00× \(300\.0 ms vs 2\.00 ms\)\s+1\.10× \(1100 µs vs 1000 µs\)$/m,
    );
    assert.match(ipvs, /^ipvs \(VM\)\s+1,000 × 10\s+1\.20× \(6\.00 s vs 5\.00 s\)\s*$/m);
  });
});
