// How long the daemons' syncs took, from their JSON log lines ("rules synced", durationMs).
export function syncDurationNote(logs: ReadonlyMap<string, string>): string {
  const durations: { full: number[]; incremental: number[] } = { full: [], incremental: [] };
  for (const text of logs.values()) {
    for (const line of text.split('\n')) {
      if (!line.includes('"msg":"rules synced"')) continue;
      const entry = JSON.parse(line) as { kind?: string; durationMs?: number };
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
