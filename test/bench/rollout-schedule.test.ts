import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readyAddresses } from '../../bench/churn-schedule.ts';
import {
  replacementIP,
  rolloutExpectation,
  rolloutPlan,
  rolloutSlice,
} from '../../bench/rollout-schedule.ts';
import { syntheticSlice } from '../../bench/synthetic-cluster.ts';

const ready = (i: number, done: number) => readyAddresses(rolloutSlice(i, 10, 3, done));

describe('rollout schedule: Deployments rolled at once', () => {
  it('rolls a Service as maxSurge / maxUnavailable 25 % do: counts go down and up, within both bounds', () => {
    const counts = Array.from({ length: 21 }, (_, done) => {
      const endpoints = rolloutSlice(42, 10, 3, done).endpoints!;
      return [endpoints.length, endpoints.filter((e) => e.conditions?.ready).length];
    });
    // Waves of 2: both out (a terminating pod and its replacement, not ready), then both in.
    assert.deepEqual(
      counts.slice(0, 5).map(([all]) => all),
      [10, 11, 12, 11, 10],
    );
    assert.deepEqual(
      counts.slice(0, 5).map(([, readyCount]) => readyCount),
      [10, 9, 8, 9, 10],
    );
    assert.ok(counts.every(([all, readyCount]) => all! <= 13 && readyCount! >= 8));
    // Done: every pod replaced, every replacement ready, nothing terminating left.
    const end = rolloutSlice(42, 10, 3, 20).endpoints!;
    assert.deepEqual(
      end.map((e) => e.addresses[0]),
      Array.from({ length: 10 }, (_, j) => replacementIP(42, 10, j)),
    );
    assert.ok(end.every((e) => e.conditions?.ready && !e.conditions.terminating));
  });

  it('takes a terminating pod out of ready while it serves, and adds its replacement not ready first', () => {
    const endpoints = rolloutSlice(42, 10, 3, 1).endpoints!;
    const byAddress = (address: string) => endpoints.find((e) => e.addresses[0] === address)!.conditions;
    const old = syntheticSlice(42, 10, 3).endpoints![0]!.addresses[0]!;
    assert.deepEqual(byAddress(old), { ready: false, serving: true, terminating: true });
    assert.deepEqual(byAddress(replacementIP(42, 10, 0)), {
      ready: false,
      serving: false,
      terminating: false,
    });
  });

  it('makes every write change the ready endpoints by exactly what it expects the kernel to show', () => {
    for (const endpoints of [10, 7, 3, 1]) {
      for (let step = 0; step < 2 * endpoints; step++) {
        const before = readyAddresses(rolloutSlice(5, endpoints, 3, step));
        const after = readyAddresses(rolloutSlice(5, endpoints, 3, step + 1));
        const { endpoint, present } = rolloutExpectation(5, endpoints, step);
        const gone = before.filter((a) => !after.includes(a));
        const came = after.filter((a) => !before.includes(a));
        assert.deepEqual([gone, came], present ? [[], [endpoint]] : [[endpoint], []]);
      }
    }
    assert.deepEqual(ready(7, 0), readyAddresses(syntheticSlice(7, 10, 3)));
  });

  it('writes 1,000 a second round-robin over 1,000 rolling Services, 3,000 rolled in a minute, each once', () => {
    const plan = rolloutPlan({
      services: 30000,
      endpoints: 10,
      nodes: 100,
      rolling: 1000,
      perSecond: 1000,
      seconds: 60,
    });
    assert.equal(plan.count, 60_000);
    const steps = new Map<number, number>();
    const keys = new Set<string>();
    for (let k = 0; k < plan.count; k++) {
      const { atMs, slice, expect } = plan.write(k);
      assert.equal(atMs, k);
      const step = steps.get(expect.service) ?? 0;
      // The Service's own writes in order, each its next step.
      assert.deepEqual(expect, rolloutExpectation(expect.service, 10, step));
      assert.equal(slice.metadata.name, `svc${expect.service}-abcde`);
      steps.set(expect.service, step + 1);
      keys.add(`${expect.service}>${expect.endpoint}${expect.present}`);
      if (k % 1000 === 999) {
        // Every second, 1,000 writes to 1,000 distinct Services.
        const second = new Set(Array.from({ length: 1000 }, (_, j) => plan.write(k - j).expect.service));
        if (k < 3000) assert.equal(second.size, 1000);
      }
    }
    assert.equal(steps.size, 3000);
    assert.ok([...steps.values()].every((n) => n === 20));
    assert.equal(keys.size, plan.count, 'two writes expect the same change');
    const rolled = steps.keys().next().value!;
    assert.deepEqual(plan.finalAddresses(rolled), ready(rolled, 20));
    const untouched = Array.from({ length: 30000 }, (_, i) => i).find((i) => !steps.has(i))!;
    assert.deepEqual(plan.finalAddresses(untouched), ready(untouched, 0));
  });

  it('rolls a Service once only', () => {
    assert.throws(
      () =>
        rolloutPlan({ services: 2000, endpoints: 10, nodes: 3, rolling: 1000, perSecond: 1000, seconds: 60 }),
      /more than the 2000 Services/,
    );
  });
});
