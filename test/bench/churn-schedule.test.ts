import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { latencySummary, replacePlan } from '../../bench/churn-schedule.ts';
import { syntheticSlice } from '../../bench/synthetic-cluster.ts';

const addresses = (slice: ReturnType<typeof syntheticSlice>) => slice.endpoints!.map((e) => e.addresses[0]);

describe('churn schedule: one endpoint replaced in place', () => {
  it('writes at a steady rate, spread over the Services, each change a new endpoint', () => {
    // 10,000 is a multiple of neither stride candidate's factors; 7,919 × 2 is, and must not repeat.
    for (const services of [10000, 15838, 7]) {
      const plan = replacePlan({ services, endpoints: 10, nodes: 3, perSecond: 10, seconds: 60 });
      const writes = Array.from({ length: plan.count }, (_, k) => plan.write(k));
      assert.equal(writes.length, 600);
      assert.deepEqual(
        writes.slice(0, 3).map((w) => w.atMs),
        [0, 100, 200],
      );
      assert.equal(writes.at(-1)!.atMs, 59_900);
      const firstRound = writes.slice(0, services).map((w) => w.expect.service);
      assert.equal(
        new Set(firstRound).size,
        firstRound.length,
        `${services}: a Service changed twice in a round`,
      );
      // The endpoint each change waits for is its own: no other change ever brings it in.
      const keys = writes.map((w) => `${w.expect.service}>${w.expect.endpoint}`);
      assert.equal(new Set(keys).size, keys.length, `${services}: two changes bring in one endpoint`);
      assert.ok(
        writes.every((w) => w.expect.present && w.slice.endpoints![0]!.addresses[0] === w.expect.endpoint),
      );
    }
  });

  it("moves the slice's first endpoint away from every address the Service had, and ends with the last move", () => {
    const plan = replacePlan({ services: 7, endpoints: 10, nodes: 3, perSecond: 10, seconds: 1.5 });
    const first = plan.write(0);
    const before = addresses(syntheticSlice(first.expect.service, 10, 3));
    const after = addresses(first.slice);
    assert.ok(!before.includes(after[0]));
    assert.deepEqual(after.slice(1), before.slice(1));
    // 15 writes over 7 Services: the first one twice more (k = 7, 14), the others once more at most.
    const last = plan.write(14);
    assert.equal(last.expect.service, first.expect.service);
    assert.deepEqual(plan.finalAddresses(first.expect.service), addresses(last.slice));
  });

  it('summarises the latencies seen (p50, p99, max) and counts the changes never seen', () => {
    const latencies = [...Array.from({ length: 98 }, (_, i) => i + 1), 500, undefined];
    const summary = latencySummary(latencies);
    assert.deepEqual(summary, { changes: 100, missed: 1, p50Ms: 50, p99Ms: 500, maxMs: 500 });
    assert.equal(latencySummary([undefined, undefined]), undefined);
  });
});
