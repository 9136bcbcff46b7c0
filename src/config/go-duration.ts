// Go's time.ParseDuration syntax, which KubeProxyConfiguration durations and kube-proxy's duration
// flags use: a sequence of decimal numbers with units, e.g. "30s", "1m0s", "1h30m", "500ms", "0".

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;

/** Milliseconds, or undefined when `text` is not a Go duration. Negative durations are not accepted. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  let rest = text.startsWith('+') ? 1 : 0;
  if (rest === text.length) return undefined;
  let total = 0;
  PART.lastIndex = rest;
  while (rest < text.length) {
    const match = PART.exec(text);
    if (match === null) return undefined;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
    rest = PART.lastIndex;
  }
  return total;
}
