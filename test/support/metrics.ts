// Reading the daemon's /metrics in tests.

/** The value of one sample (`series`: name and labels) in a Prometheus text exposition `body`. */
export function metricSample(body: string, series: string): number | undefined {
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
