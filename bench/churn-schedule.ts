// The churn section's plan, pure: which Service's slice changes when, the map element that shows
// the change committed in the kernel (as `nft monitor` prints it), and the latency summary.

import type { EndpointSlice } from '../src/kube/objects.ts';
import { percentile, round } from './measure.ts';
import { syntheticService, syntheticSlice } from './synthetic-cluster.ts';

export interface ScheduledChange {
  /** When the write is due, ms after the churn starts. */
  readonly atMs: number;
  readonly service: number;
  /** syntheticSlice's variant: the first endpoint moves to a pod IP no earlier change gave it. */
  readonly variant: number;
}

export interface ChurnOptions {
  readonly services: number;
  readonly perSecond: number;
  readonly seconds: number;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * A steady open-loop schedule: change k at k / perSecond seconds. The services are spread over
 * the cluster by a prime stride coprime with the count (a fixed, seedless shuffle), so the first
 * `services` changes touch distinct Services and each later round moves every one to its next
 * variant: no two changes ever write the same endpoint address to the same Service.
 */
export function churnSchedule({ services, perSecond, seconds }: ChurnOptions): ScheduledChange[] {
  const stride = [7919, 7907, 7901, 1].find((p) => gcd(p, services) === 1)!;
  const count = Math.round(perSecond * seconds);
  return Array.from({ length: count }, (_, k) => ({
    atMs: (k * 1000) / perSecond,
    service: (k * stride) % services,
    variant: Math.floor(k / services) + 1,
  }));
}

/** The slice the change writes. */
export function churnSlice(change: ScheduledChange, endpoints: number, nodes: number): EndpointSlice {
  return syntheticSlice(change.service, endpoints, nodes, change.variant);
}

/** The element the change adds to the endpoint map: service VIP → its first endpoint's new address. */
export function changeKey(change: ScheduledChange, endpoints: number): string {
  const vip = syntheticService(change.service).spec.clusterIP!;
  return `${vip}>${churnSlice(change, endpoints, 1).endpoints![0]!.addresses[0]}`;
}

const MAP_ELEMENT = /(\d+\.\d+\.\d+\.\d+) \. \d+ \. \d+ : (\d+\.\d+\.\d+\.\d+) \. \d+/g;

/**
 * The VIP→endpoint keys of the address . port . index : endpoint . port elements that an
 * `nft monitor new elements` line adds, in changeKey's form. Any index: a dataplane may order a
 * Service's endpoints.
 */
export function addedElementKeys(line: string): string[] {
  if (!line.startsWith('add element ')) return [];
  return [...line.matchAll(MAP_ELEMENT)].map(([, vip, endpoint]) => `${vip}>${endpoint}`);
}

export interface LatencySummary {
  readonly changes: number;
  /** Changes whose element was never seen before the wait ended. */
  readonly missed: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** p50/p99/max of the seen latencies; undefined when none was seen. */
export function latencySummary(latencies: readonly (number | undefined)[]): LatencySummary | undefined {
  const seen = latencies.filter((ms): ms is number => ms !== undefined);
  if (seen.length === 0) return undefined;
  return {
    changes: latencies.length,
    missed: latencies.length - seen.length,
    p50Ms: round(percentile(seen, 50), 2),
    p99Ms: round(percentile(seen, 99), 2),
    maxMs: round(Math.max(...seen), 2),
  };
}
