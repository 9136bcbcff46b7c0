// The churn sections' plans, pure: which Service's slice is written when, what shows each write
// committed in the kernel, the ready endpoints every Service ends with, and the latency summary.
// Two plans: one endpoint replaced in place (the round-2 churn, below) and a rolling update of many
// Deployments at once (rollout-schedule.ts). The kernel's side of the check is churn-kernel.ts.

import type { EndpointSlice } from '../src/kube/objects.ts';
import { percentile, round } from './measure.ts';
import { syntheticSlice } from './synthetic-cluster.ts';

/** What shows a write committed: this endpoint of Service `service` in or out of its endpoints. */
export interface Expectation {
  readonly service: number;
  readonly endpoint: string;
  readonly present: boolean;
}

export interface ChurnWrite {
  /** When the write is due, ms after the churn starts. */
  readonly atMs: number;
  /** The Service's slice as the write leaves it. */
  readonly slice: EndpointSlice;
  readonly expect: Expectation;
}

/**
 * A whole churn: `count` writes, each built when asked (a minute at 1,000/s is 60,000 slices, not
 * to be held at once), and what every Service's ready endpoints are once all are in.
 */
export interface ChurnPlan {
  readonly count: number;
  write(k: number): ChurnWrite;
  /** The addresses of Service `i`'s ready endpoints after the last write. */
  finalAddresses(i: number): string[];
}

export interface ChurnOptions {
  readonly services: number;
  readonly endpoints: number;
  readonly nodes: number;
  readonly perSecond: number;
  readonly seconds: number;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The k-th Service of a prime-stride walk over the cluster (a fixed, seedless shuffle). */
export function nthService(k: number, services: number): number {
  const stride = [7919, 7907, 7901, 1].find((p) => gcd(p, services) === 1)!;
  return (k * stride) % services;
}

export const readyAddresses = (slice: EndpointSlice): string[] =>
  slice.endpoints!.filter((e) => e.conditions?.ready === true).map((e) => e.addresses[0]!);

/**
 * A steady open-loop schedule of in-place replacements: write k at k / perSecond seconds. The
 * first `services` writes touch distinct Services and each later round moves every one to its
 * next variant (syntheticSlice's: the first endpoint moves to a pod IP no earlier write gave it),
 * so each write's new endpoint is one the Service never had.
 */
export function replacePlan({ services, endpoints, nodes, perSecond, seconds }: ChurnOptions): ChurnPlan {
  const count = Math.round(perSecond * seconds);
  const variant = (k: number) => Math.floor(k / services) + 1;
  const lastVariant = new Map<number, number>();
  for (let k = 0; k < count; k++) lastVariant.set(nthService(k, services), variant(k));
  return {
    count,
    write(k) {
      const service = nthService(k, services);
      const slice = syntheticSlice(service, endpoints, nodes, variant(k));
      return {
        atMs: (k * 1000) / perSecond,
        slice,
        expect: { service, endpoint: slice.endpoints![0]!.addresses[0]!, present: true },
      };
    },
    finalAddresses(i) {
      return readyAddresses(syntheticSlice(i, endpoints, 1, lastVariant.get(i) ?? 0));
    },
  };
}

export interface LatencySummary {
  readonly changes: number;
  /** Changes whose effect was never seen before the wait ended. */
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
    maxMs: round(
      seen.reduce((a, b) => Math.max(a, b), 0),
      2,
    ),
  };
}
