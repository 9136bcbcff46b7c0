import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { curveFailures, curvePoints, curveSvg, formatCurveTable } from '../../bench/curve.ts';

const nft = (services: number, coldStartMs: number, bareLoadMs: number) => ({
  services,
  endpointsPerService: 10,
  wide: false,
  coldStartMs,
  bareLoadMs,
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

/** The (x, y) points of one series' polyline in the SVG. */
function series(svg: string, name: string): [number, number][] {
  const group = new RegExp(`<g data-series="${name}">\\n<polyline points="([^"]*)"`).exec(svg);
  assert.ok(group, `series ${name} is drawn`);
  return group[1]!.split(' ').map((pair) => pair.split(',').map(Number) as [number, number]);
}

describe('bench curve', () => {
  it('takes every size of each section, the wide Service last, and ipvs change figures at its largest size', () => {
    const points = curvePoints({
      ...FIGURES,
      ipvs: {
        endpointsPerService: 10,
        sizes: [
          { services: 10000, coldSyncMs: 60000, bareLoadMs: 50000 },
          { services: 1000, coldSyncMs: 6000, bareLoadMs: 5000 },
        ],
        endpointChangeMedianMs: 40,
        bareNetlinkCallMedianMs: 0.5,
      },
    });
    assert.deepEqual(
      points.map((p) => `${p.mode} ${p.services}${p.wide ? ' wide' : ''}`),
      [
        'nftables 100',
        'nftables 1000',
        'nftables 30000',
        'nftables 1 wide',
        'iptables 100',
        'iptables 1000',
        'ipvs 1000',
        'ipvs 10000',
      ],
    );
    const ipvs = points.filter((p) => p.mode === 'ipvs');
    assert.deepEqual(
      ipvs.map((p) => [p.services, p.changeMs, p.bareChangeMs]),
      [
        [1000, undefined, undefined],
        [10000, 40, 0.5],
      ],
    );
    assert.equal(points.find((p) => p.mode === 'iptables')?.bareChangeMs, 380);
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
    assert.match(svg, /nftables: bare nft -f/);
    assert.match(svg, /iptables: kproxy cold sync/);
    assert.doesNotMatch(svg, /NaN|undefined|Infinity/);
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
      /nftables\s+30,000 × 10\s+1\.11× \(10\.00 s vs 9\.00 s\)\s+2\.00× \(3\.00 ms vs 1\.50 ms\)\s+1\.05× \(168 µs vs 160 µs\)/,
    );
    assert.match(table, /nftables\s+1 × 10,000\s+1\.11×/);
    assert.match(
      table,
      /iptables\s+1,000 × 10\s+1\.25× \(1\.00 s vs 800\.0 ms\)\s+1\.05× \(400\.0 ms vs 380\.0 ms\)$/m,
    );
  });
});
