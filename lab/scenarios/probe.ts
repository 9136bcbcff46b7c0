// The probes scenarios repeat: connect N times from a place and tally who answered.
import type { Place, Protocol } from '../driver.ts';
import { type ScenarioRun, tallyBackends } from './scenario.ts';

/**
 * The connect timeout while waiting for the nodes to follow a change: short, so that a SYN dropped
 * before the sync does not inflate the latency seen (probes repeat until the deadline anyway).
 */
export const PROBE_TIMEOUT_MS = 500;

export function placeName(place: Place): string {
  return place.kind === 'external'
    ? 'external client'
    : place.kind === 'pod'
      ? `pod ${place.pod}`
      : `node ${place.node}`;
}

export async function tallyFrom(
  run: ScenarioRun,
  from: Place,
  protocol: Protocol,
  host: string,
  port: number,
  count: number,
  timeoutMs = 2000,
): Promise<Map<string, number>> {
  return tallyBackends(await run.lab.connect(from, protocol, host, port, { count, timeoutMs }));
}
