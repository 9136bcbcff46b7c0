// Go's time.Duration as text, which KubeProxyConfiguration durations and kube-proxy's duration
// flags use: parsed from a sequence of decimal numbers with units ("30s", "1m0s", "1h30m", "500ms",
// "0", "-5s"), and printed as Duration.String() prints it, so messages show what Go would.

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

/** Milliseconds (negative for "-5s", which validation then refuses by name), or undefined when `text` is not a Go duration. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  const sign = text.startsWith('-') ? -1 : 1;
  let rest = text.startsWith('+') || text.startsWith('-') ? 1 : 0;
  if (rest === text.length) return undefined;
  let total = 0;
  PART.lastIndex = rest;
  while (rest < text.length) {
    const match = PART.exec(text);
    if (match === null) return undefined;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
    rest = PART.lastIndex;
  }
  return total === 0 ? 0 : sign * total;
}

/** Go's Duration.String(): "0s", "500ms", "1.5s", "1m0s", "24h0m0s", "-5s". */
export function formatGoDuration(ms: number): string {
  if (ms < 0) return `-${formatGoDuration(-ms)}`;
  const ns = Math.round(ms * 1e6);
  if (ns === 0) return '0s';
  if (ns < 1e9) {
    const [unit, size] = ns < 1e3 ? ['ns', 1] : ns < 1e6 ? ['µs', 1e3] : ['ms', 1e6];
    return `${decimal(ns, size)}${unit}`;
  }
  const hours = Math.floor(ns / 3.6e12);
  const minutes = Math.floor((ns % 3.6e12) / 6e10);
  const seconds = `${decimal(ns % 6e10, 1e9)}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  return minutes > 0 ? `${minutes}m${seconds}` : seconds;
}

/** `value / size` without a float's rounding noise or trailing zeros ("1.5", "30"). */
function decimal(value: number, size: number): string {
  const whole = Math.floor(value / size);
  const fraction = value % size;
  if (fraction === 0) return String(whole);
  const digits = String(size).length - 1;
  return `${whole}.${String(fraction).padStart(digits, '0').replace(/0+$/, '')}`;
}
