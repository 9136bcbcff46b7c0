// How long the daemons' syncs took, from their log lines ("rules synced", kind, durationMs), in
// either of kproxy's formats: klog text (the default) or JSON.
export function syncDurationNote(logs: ReadonlyMap<string, string>): string {
  const durations: { full: number[]; incremental: number[] } = { full: [], incremental: [] };
  for (const text of logs.values()) {
    for (const line of text.split('\n')) {
      if (!line.includes('"rules synced"')) continue;
      const entry = syncedEntry(line);
      if ((entry.kind === 'full' || entry.kind === 'incremental') && typeof entry.durationMs === 'number') {
        durations[entry.kind].push(entry.durationMs);
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const part = (kind: 'full' | 'incremental') =>
    durations[kind].length === 0
      ? `no ${kind} syncs`
      : `${durations[kind].length} ${kind} syncs, median ${Math.round(median(durations[kind])!)} ms`;
  return `daemon syncs: ${part('full')}; ${part('incremental')}`;
}

/** The fields of one "rules synced" line: a JSON object, or klog's `kind="full" durationMs=12.5`. */
function syncedEntry(line: string): { kind?: string; durationMs?: number } {
  if (line.startsWith('{')) return JSON.parse(line) as { kind?: string; durationMs?: number };
  const kind = / kind="(\w+)"/.exec(line)?.[1];
  const durationMs = / durationMs=([\d.]+)/.exec(line)?.[1];
  return { ...(kind ? { kind } : {}), ...(durationMs ? { durationMs: Number(durationMs) } : {}) };
}
