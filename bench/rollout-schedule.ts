// The rollout section's plan, pure (issue 33's "churn as clusters make it"): `rolling` Deployments
// rolled at once, as the Deployment controller does it with maxSurge and maxUnavailable 25 %, each
// Deployment one Service of the synthetic cluster (syntheticSlice: E ready pods). A Service's
// rollout replaces its pods in waves of maxUnavailable (2 of 10, within maxSurge's 3 new pods at
// once): first each pod of the wave goes terminating (ready=false, serving, terminating) and its
// replacement appears, not ready; then each replacement turns ready and its old pod is gone. So the
// slice's endpoint count goes up (10 → 12) and back, and its ready count down (10 → 8) and back.
// A pod appearing not ready and a terminating one disappearing change nothing a packet meets, so
// each is written together with the wave's next visible step (the EndpointSlice controller batches
// a Service's pod changes the same way): every write takes one endpoint out of the Service's
// endpoints or puts one in, which the kernel shows, so each write is timed and none is lost
// unseen. Writes go round-robin over the rolling Services, `perSecond` a second; once a
// generation's rollouts are done the next `rolling` Services of the cluster (a prime-stride walk)
// start theirs, so a minute at 1,000/s rolls 3,000 Deployments of 10 pods, 1,000 at a time.

import type { EndpointSliceEndpoint as Endpoint, EndpointSlice } from '../src/kube/objects.ts';
import {
  type ChurnOptions,
  type ChurnPlan,
  type Expectation,
  nthService,
  readyAddresses,
} from './churn-schedule.ts';
import { podIP, syntheticSlice } from './synthetic-cluster.ts';

export interface RolloutOptions extends ChurnOptions {
  /** Deployments rolling at once. */
  readonly rolling: number;
}

/** maxUnavailable, 25 % of the replicas rounded down (at least one): the wave's size. */
export function waveSize(endpoints: number): number {
  return Math.max(1, Math.floor(endpoints / 4));
}

/**
 * The replacement of pod `j` of Service `i`: half the synthetic pod space away from the Service's
 * own (podIP's i * E + j), so a Service never holds two endpoints with one address.
 */
export function replacementIP(i: number, endpoints: number, j: number): string {
  return podIP(i * endpoints + j + 32767);
}

/** The writes of a rollout (0-based) after which pod `j` is terminating, and its replacement ready. */
function podSteps(j: number, endpoints: number): { readonly out: number; readonly in: number } {
  const w = waveSize(endpoints);
  const start = j - (j % w);
  const size = Math.min(w, endpoints - start);
  return { out: 2 * start + (j - start), in: 2 * start + size + (j - start) };
}

const TERMINATING = { ready: false, serving: true, terminating: true };
const STARTING = { ready: false, serving: false, terminating: false };

/** Service `i`'s slice once `done` writes of its rollout are in (0: syntheticSlice's). */
export function rolloutSlice(i: number, endpoints: number, nodes: number, done: number): EndpointSlice {
  const base = syntheticSlice(i, endpoints, nodes);
  const pods = base.endpoints!.flatMap((old, j): Endpoint[] => {
    const steps = podSteps(j, endpoints);
    const replacement = (conditions: Endpoint['conditions']): Endpoint => ({
      addresses: [replacementIP(i, endpoints, j)],
      conditions,
      nodeName: `node-${(i + j + 1) % nodes}`,
    });
    if (done <= steps.out) return [old];
    if (done <= steps.in) return [{ ...old, conditions: TERMINATING }, replacement(STARTING)];
    return [replacement(old.conditions)];
  });
  return { ...base, endpoints: pods };
}

/** What write `step` (0-based) of Service `i`'s rollout shows in the kernel. */
export function rolloutExpectation(i: number, endpoints: number, step: number): Expectation {
  for (let j = 0; j < endpoints; j++) {
    const steps = podSteps(j, endpoints);
    if (steps.out === step) return { service: i, endpoint: podIP(i * endpoints + j), present: false };
    if (steps.in === step) return { service: i, endpoint: replacementIP(i, endpoints, j), present: true };
  }
  throw new Error(`a rollout of ${endpoints} pods has no write ${step}`);
}

export function rolloutPlan(options: RolloutOptions): ChurnPlan {
  const { services, endpoints, nodes, rolling, perSecond, seconds } = options;
  const count = Math.round(perSecond * seconds);
  const generation = rolling * 2 * endpoints;
  if (Math.ceil(count / generation) * rolling > services)
    throw new Error(`rollout: ${count} writes roll more than the ${services} Services, once each`);
  /** Write k: its generation's `rolling` Services take turns, one write of its rollout each. */
  const at = (k: number) => {
    const inGeneration = k % generation;
    return {
      service: nthService(Math.floor(k / generation) * rolling + (inGeneration % rolling), services),
      step: Math.floor(inGeneration / rolling),
    };
  };
  const done = new Map<number, number>();
  for (let k = 0; k < count; k++) {
    const { service, step } = at(k);
    done.set(service, step + 1);
  }
  return {
    count,
    write(k) {
      const { service, step } = at(k);
      return {
        atMs: (k * 1000) / perSecond,
        slice: rolloutSlice(service, endpoints, nodes, step + 1),
        expect: rolloutExpectation(service, endpoints, step),
      };
    },
    finalAddresses: (i) => readyAddresses(rolloutSlice(i, endpoints, 1, done.get(i) ?? 0)),
  };
}
