// The scaling curve of each mode: kproxy's cold sync beside the bare kernel load of the same
// ruleset at every size one run measured (and one change, and connect latency), as a table and as
// an SVG line chart, log-log. Pure and deterministic (the same figures give the same bytes), so the
// chart is tested as it is and can be committed beside the figures it shows. Each mode's series is
// what its daemon does: nftables' is the netlink element writer's (`kproxy run` writes elements
// by netlink), with the nft-text path beside it for information.
import { type BenchFigures, formatColumns, ms } from './report.ts';

type CurveSection = 'nftables' | 'iptables' | 'ipvs';
/** A mode's series, or one drawn beside it for information ('nftables-text'). */
export type CurveSeries = CurveSection | 'nftables-text';

export interface CurvePoint {
  readonly series: CurveSeries;
  readonly services: number;
  readonly endpointsPerService: number;
  /** One Service with all the endpoints, not `services` of `endpointsPerService` each. */
  readonly wide: boolean;
  readonly coldSyncMs: number;
  readonly bareLoadMs: number;
  readonly changeMs?: number | undefined;
  readonly bareChangeMs?: number | undefined;
  readonly connectFirstUs?: number | undefined;
  readonly connectLastUs?: number | undefined;
}

type Figures = Readonly<Record<string, unknown>>;

/** Where each series' section keeps its figures, what its bare baselines are, and its colour. */
interface SeriesSpec {
  readonly series: CurveSeries;
  readonly section: CurveSection;
  /**
   * Beside its section's main series, for information: no bare line (the main series' is the
   * same) and no connect figures (the rules are the same).
   */
  readonly aside?: true;
  readonly label: string;
  /** The cold sync's name in the chart's legend; default 'kproxy cold sync'. */
  readonly coldLabel?: string;
  readonly bareLoad: string;
  readonly bareChange: string;
  readonly keys: {
    readonly cold: string;
    readonly bare: string;
    readonly change: string;
    readonly bareChange: string;
  };
  readonly colour: string;
}

const SERIES: readonly SeriesSpec[] = [
  {
    // As the daemon: elements by netlink batches (bench/nftables-netlink.ts).
    series: 'nftables',
    section: 'nftables',
    label: 'nftables',
    coldLabel: 'kproxy cold sync (netlink)',
    bareLoad: 'bare nft -f',
    bareChange: 'its element batch and nft transactions alone',
    keys: {
      cold: 'netlinkColdStartMs',
      bare: 'bareLoadMs',
      change: 'netlinkEndpointChangeMedianMs',
      bareChange: 'netlinkEndpointChangeTransactionMedianMs',
    },
    colour: '#1f77b4',
  },
  {
    series: 'nftables-text',
    section: 'nftables',
    aside: true,
    label: 'nftables, nft text',
    bareLoad: 'bare nft -f',
    bareChange: 'its nft transactions alone',
    keys: {
      cold: 'coldStartMs',
      bare: 'bareLoadMs',
      change: 'endpointChangeMedianMs',
      bareChange: 'endpointChangeToolMedianMs',
    },
    colour: '#17becf',
  },
  {
    series: 'iptables',
    section: 'iptables',
    label: 'iptables',
    bareLoad: 'bare iptables-nft-restore',
    bareChange: 'bare restore of the changed chains',
    keys: {
      cold: 'fullSyncMs',
      bare: 'bareFullRestoreMs',
      change: 'partialSyncMs',
      bareChange: 'bareChangedChainsRestoreMs',
    },
    colour: '#d62728',
  },
  {
    series: 'ipvs',
    section: 'ipvs',
    label: 'ipvs (VM)',
    bareLoad: 'bare ip + ipvsadm + nft',
    bareChange: 'one bare netlink call',
    keys: {
      cold: 'coldSyncMs',
      bare: 'bareLoadMs',
      change: 'endpointChangeMedianMs',
      bareChange: 'bareNetlinkCallMedianMs',
    },
    colour: '#2ca02c',
  },
];

const num = (figures: Figures | undefined, key: string): number | undefined => {
  const value = figures?.[key];
  return typeof value === 'number' ? value : undefined;
};

/**
 * Every point measured, per series in SERIES order, the N-services points by size, then the wide
 * one. A section's `sizes` are its points, each with the figures measured there.
 */
export function curvePoints(figures: BenchFigures): CurvePoint[] {
  return SERIES.flatMap(({ series, section: from, aside, keys }) => {
    const section = figures[from];
    const sizes = Array.isArray(section?.sizes) ? (section.sizes as Figures[]) : [];
    const points = sizes.flatMap((size): CurvePoint[] => {
      const services = num(size, 'services');
      const coldSyncMs = num(size, keys.cold);
      const bareLoadMs = num(size, keys.bare);
      if (services === undefined || coldSyncMs === undefined || bareLoadMs === undefined) return [];
      return [
        {
          series,
          services,
          endpointsPerService: num(size, 'endpointsPerService') ?? num(section, 'endpointsPerService') ?? 10,
          wide: size.wide === true,
          coldSyncMs,
          bareLoadMs,
          changeMs: num(size, keys.change),
          bareChangeMs: num(size, keys.bareChange),
          connectFirstUs: aside ? undefined : num(size, 'connectFirstServiceUs'),
          connectLastUs: aside ? undefined : num(size, 'connectLastServiceUs'),
        },
      ];
    });
    return points.sort((a, b) => Number(a.wide) - Number(b.wide) || a.services - b.services);
  });
}

/**
 * The points whose kproxy sync failed (as the daemon's would, on its own tool timeouts), so the
 * curve says why it has no point there.
 */
export function curveFailures(figures: BenchFigures): string[] {
  return SERIES.filter((spec) => !spec.aside).flatMap(({ section, label }) => {
    const sizes = figures[section]?.sizes;
    return (Array.isArray(sizes) ? (sizes as Figures[]) : []).flatMap((size) =>
      typeof size.fullSyncFailed === 'string'
        ? [
            `${label} ${size.wide === true ? `1 × ${count(num(size, 'endpointsPerService') ?? 0)}` : `${count(num(size, 'services') ?? 0)} services`}: kproxy's sync failed: ${size.fullSyncFailed}`,
          ]
        : [],
    );
  });
}

/**
 * The nftables points whose elements went (partly) to nft rather than by netlink: the writer's
 * fallback, for a transaction whose batch exceeds one datagram (the socket's send buffer) or that
 * it cannot split. The daemon takes the same path there, so the point stands, and says so.
 */
export function curveFallbacks(figures: BenchFigures): string[] {
  const sizes = figures.nftables?.sizes;
  return (Array.isArray(sizes) ? (sizes as Figures[]) : []).flatMap((size) => {
    const cold = num(size, 'netlinkColdStartNftElements') ?? 0;
    const changes = num(size, 'netlinkEndpointChangesByNft') ?? 0;
    if (cold === 0 && changes === 0) return [];
    const where =
      size.wide === true
        ? `1 × ${count(num(size, 'endpointsPerService') ?? 0)}`
        : `${count(num(size, 'services') ?? 0)} services`;
    const oversize = num(size, 'netlinkColdStartOversizeBatches') ?? 0;
    return [
      `nftables ${where}: elements by nft, not netlink (the writer's fallback): ${count(cold)} of the cold start's (${oversize} ${oversize === 1 ? 'batch' : 'batches'} over one datagram), ${changes} of ${num(size, 'endpointChangeRuns') ?? '?'} changes`,
    ];
  });
}

const specOf = (p: CurvePoint) => SERIES.find((spec) => spec.series === p.series)!;
const count = (n: number) => n.toLocaleString('en-US');
const shapeOf = (p: CurvePoint) =>
  p.wide ? `1 × ${count(p.endpointsPerService)}` : `${count(p.services)} × ${p.endpointsPerService}`;

function ratio(measured: number | undefined, base: number | undefined, show: (v: number) => string): string {
  if (measured === undefined || base === undefined || base <= 0) return '';
  return `${(measured / base).toFixed(2)}× (${show(measured)} vs ${show(base)})`;
}

/** The curve as text: one line per point, each figure against its bare baseline from the same run. */
export function formatCurveTable(points: readonly CurvePoint[]): string {
  if (points.length === 0) return 'curve: no sizes measured';
  const cells = points.map((p) => [
    specOf(p).label,
    shapeOf(p),
    ratio(p.coldSyncMs, p.bareLoadMs, ms),
    ratio(p.changeMs, p.bareChangeMs, ms),
    ratio(p.connectLastUs, p.connectFirstUs, (us) => `${us.toFixed(0)} µs`),
  ]);
  const header = [
    'mode',
    'services × endpoints',
    'cold sync vs bare load',
    'one change vs bare',
    'connect last vs first',
  ];
  const bases = SERIES.filter((m) => points.some((p) => p.series === m.series)).map(
    (m) => `${m.label}: ${m.bareLoad}; ${m.bareChange}`,
  );
  return [formatColumns(header, cells), `bare baselines: ${bases.join(' | ')}`].join('\n');
}

// The chart's geometry, in SVG user units.
const WIDTH = 860;
const HEIGHT = 460;
const PLOT = { left: 80, right: 520, top: 50, bottom: 390 } as const;
const LEGEND_X = 545;

/** Whole decades around [min, max], a tenth of a decade clear of both: no point on the frame. */
function decades(values: readonly number[]): { lo: number; hi: number } {
  const lo = Math.floor(Math.log10(Math.min(...values)) - 0.1);
  const hi = Math.ceil(Math.log10(Math.max(...values)) + 0.1);
  return { lo, hi: Math.max(hi, lo + 1) };
}

function padded(values: readonly number[]): { lo: number; hi: number } {
  return { lo: Math.log10(Math.min(...values)) - 0.2, hi: Math.log10(Math.max(...values)) + 0.2 };
}

const fixed = (v: number) => v.toFixed(1);
const escapeXml = (text: string) =>
  text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

function endpointsLabel(exponent: number): string {
  const v = 10 ** exponent;
  return v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : String(v);
}

function secondsLabel(exponent: number): string {
  return exponent >= 0 ? `${10 ** exponent} s` : `${(10 ** exponent).toFixed(-exponent)} s`;
}

const circle = (x: number, y: number, colour: string, filled: boolean) =>
  `<circle cx="${fixed(x)}" cy="${fixed(y)}" r="3.5" fill="${filled ? colour : 'white'}" stroke="${colour}" stroke-width="1.5"/>`;
const diamond = (x: number, y: number, colour: string, filled: boolean) =>
  `<path d="M${fixed(x)} ${fixed(y - 6)}L${fixed(x + 6)} ${fixed(y)}L${fixed(x)} ${fixed(y + 6)}L${fixed(x - 6)} ${fixed(y)}Z" fill="${filled ? colour : 'white'}" stroke="${colour}" stroke-width="1.5"/>`;

/**
 * The chart: x the endpoints in the cluster (N services × E, so the N-services points are the
 * services scale shifted by E; a wide Service sits where its endpoint count does), y seconds, both
 * log; per mode a solid line for kproxy's cold sync and a dashed one for the bare kernel load of
 * the same ruleset, a series beside it (nft text) dotted, the wide Service as unconnected diamonds.
 */
export function curveSvg(points: readonly CurvePoint[]): string {
  const head = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`;
  const lines: string[] = [head, `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`];
  if (points.length === 0) {
    lines.push(
      `<text x="${WIDTH / 2}" y="${HEIGHT / 2}" text-anchor="middle">no curve measured</text>`,
      '</svg>',
    );
    return `${lines.join('\n')}\n`;
  }
  const endpointsOf = (p: CurvePoint) => p.services * p.endpointsPerService;
  // Padded by a fifth of a decade, so that no point sits on the frame or under an axis label.
  const xs = padded(points.map(endpointsOf));
  const ys = decades(points.flatMap((p) => [p.coldSyncMs / 1000, p.bareLoadMs / 1000]));
  const x = (endpoints: number) =>
    PLOT.left + ((Math.log10(endpoints) - xs.lo) / (xs.hi - xs.lo)) * (PLOT.right - PLOT.left);
  const y = (seconds: number) =>
    PLOT.bottom - ((Math.log10(seconds) - ys.lo) / (ys.hi - ys.lo)) * (PLOT.bottom - PLOT.top);

  lines.push(
    `<text x="${PLOT.left}" y="24" font-size="14" font-weight="bold">Cold sync vs the bare kernel load of the same ruleset</text>`,
  );
  for (let e = Math.ceil(xs.lo); e <= Math.floor(xs.hi); e++) {
    const at = fixed(x(10 ** e));
    lines.push(
      `<line x1="${at}" y1="${PLOT.top}" x2="${at}" y2="${PLOT.bottom}" stroke="#ddd"/>`,
      `<text x="${at}" y="${PLOT.bottom + 18}" text-anchor="middle">${endpointsLabel(e)}</text>`,
    );
  }
  for (let e = ys.lo; e <= ys.hi; e++) {
    const at = fixed(y(10 ** e));
    lines.push(
      `<line x1="${PLOT.left}" y1="${at}" x2="${PLOT.right}" y2="${at}" stroke="#ddd"/>`,
      `<text x="${PLOT.left - 8}" y="${at}" text-anchor="end" dominant-baseline="middle">${secondsLabel(e)}</text>`,
    );
  }
  // The sizes measured, as services, along the top edge.
  const sizes = [...new Set(points.filter((p) => !p.wide).map(endpointsOf))].sort((a, b) => a - b);
  for (const endpoints of sizes) {
    const services = points.find((p) => !p.wide && endpointsOf(p) === endpoints)!.services;
    lines.push(
      `<text x="${fixed(x(endpoints))}" y="${PLOT.top - 6}" text-anchor="middle" font-size="10" fill="#666">${count(services)} svc</text>`,
    );
  }
  lines.push(
    `<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#333"/>`,
    `<text x="${(PLOT.left + PLOT.right) / 2}" y="${PLOT.bottom + 42}" text-anchor="middle">endpoints in the cluster (N services × ${points[0]!.endpointsPerService}; ◆ one Service with them all), log</text>`,
    `<text transform="translate(22 ${(PLOT.top + PLOT.bottom) / 2}) rotate(-90)" text-anchor="middle">seconds, log</text>`,
  );

  let legendY = PLOT.top + 6;
  const legend = (sample: string, text: string) => {
    lines.push(sample, `<text x="${LEGEND_X + 34}" y="${legendY + 4}">${escapeXml(text)}</text>`);
    legendY += 20;
  };
  for (const spec of SERIES) {
    const mine = points.filter((p) => p.series === spec.series);
    if (mine.length === 0) continue;
    const { colour } = spec;
    // The aside series has no bare line: its section's main series draws it.
    const kinds = [
      ['kproxy', (p: CurvePoint) => p.coldSyncMs, spec.aside ? ' stroke-dasharray="2 3"' : ''],
      ['bare', (p: CurvePoint) => p.bareLoadMs, ' stroke-dasharray="6 4"'],
    ] as const;
    for (const [kind, figure, dash] of spec.aside ? kinds.slice(0, 1) : kinds) {
      const filled = kind === 'kproxy';
      const line = mine.filter((p) => !p.wide);
      const coords = line.map((p) => `${fixed(x(endpointsOf(p)))},${fixed(y(figure(p) / 1000))}`).join(' ');
      lines.push(
        `<g data-series="${spec.series}-${kind}">`,
        `<polyline points="${coords}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`,
        ...line.map((p) => circle(x(endpointsOf(p)), y(figure(p) / 1000), colour, filled)),
        '</g>',
      );
      const wide = mine.filter((p) => p.wide);
      if (wide.length > 0) {
        lines.push(
          `<g data-series="${spec.series}-${kind}-wide">`,
          ...wide.map((p) => diamond(x(endpointsOf(p)), y(figure(p) / 1000), colour, filled)),
          '</g>',
        );
      }
      legend(
        `<line x1="${LEGEND_X}" y1="${legendY}" x2="${LEGEND_X + 26}" y2="${legendY}" stroke="${colour}" stroke-width="2"${dash}/>`,
        `${spec.label}: ${filled ? (spec.coldLabel ?? 'kproxy cold sync') : spec.bareLoad}`,
      );
    }
  }
  const wide = points.find((p) => p.wide);
  if (wide !== undefined) {
    legend(
      diamond(LEGEND_X + 13, legendY, '#333', true),
      `1 Service × ${count(wide.endpointsPerService)} endpoints`,
    );
  }
  lines.push('</svg>');
  return `${lines.join('\n')}\n`;
}
