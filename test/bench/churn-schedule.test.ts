import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addedElementKeys,
  changeKey,
  churnSchedule,
  churnSlice,
  latencySummary,
} from '../../bench/churn-schedule.ts';
import { syntheticSlice } from '../../bench/synthetic-cluster.ts';

describe('churn schedule', () => {
  it('writes at a steady rate, spread over the Services, each change a new element', () => {
    // 10,000 is a multiple of neither stride candidate's factors; 7,919 × 2 is, and must not repeat.
    for (const services of [10000, 15838, 7]) {
      const schedule = churnSchedule({ services, perSecond: 10, seconds: 60 });
      assert.equal(schedule.length, 600);
      assert.deepEqual(
        schedule.slice(0, 3).map((c) => c.atMs),
        [0, 100, 200],
      );
      assert.equal(schedule.at(-1)!.atMs, 59_900);
      assert.ok(schedule.every((c) => c.service >= 0 && c.service < services));
      const firstRound = schedule.slice(0, services).map((c) => c.service);
      assert.equal(
        new Set(firstRound).size,
        firstRound.length,
        `${services}: a Service changed twice in a round`,
      );
      // The element each change waits for is its own: no other change ever writes it.
      const keys = schedule.map((c) => changeKey(c, 10));
      assert.equal(new Set(keys).size, keys.length, `${services}: two changes write the same element`);
    }
  });

  it("moves the slice's first endpoint away from every address the Service had", () => {
    const [change] = churnSchedule({ services: 10000, perSecond: 10, seconds: 1 });
    const before = syntheticSlice(change!.service, 10, 3).endpoints!.map((e) => e.addresses[0]);
    const after = churnSlice(change!, 10, 3).endpoints!.map((e) => e.addresses[0]);
    assert.ok(!before.includes(after[0]));
    assert.deepEqual(after.slice(1), before.slice(1));
  });

  it("finds the change's element in nft monitor's lines, at any index, and only in added ones", () => {
    const change = { atMs: 0, service: 3, variant: 1 };
    const [vip, endpoint] = changeKey(change, 10).split('>');
    const added = `add element ip kproxy backends-tcp { ${vip} . 80 . 4 : ${endpoint} . 8080 }`;
    assert.deepEqual(addedElementKeys(added), [changeKey(change, 10)]);
    // Two elements in one line (a transaction printed together).
    assert.deepEqual(
      addedElementKeys(
        `add element ip kproxy backends-tcp { 10.96.0.10 . 80 . 0 : 10.244.0.1 . 8080, ${vip} . 80 . 4 : ${endpoint} . 8080 }`,
      ),
      ['10.96.0.10>10.244.0.1', changeKey(change, 10)],
    );
    assert.deepEqual(addedElementKeys(added.replace('add element', 'delete element')), []);
    // Not an endpoint element: a set of addresses only.
    assert.deepEqual(addedElementKeys('add element ip kproxy cluster-ips { 10.96.0.13 }'), []);
  });

  it('summarises the latencies seen (p50, p99, max) and counts the changes never seen', () => {
    const latencies = [...Array.from({ length: 98 }, (_, i) => i + 1), 500, undefined];
    const summary = latencySummary(latencies);
    assert.deepEqual(summary, { changes: 100, missed: 1, p50Ms: 50, p99Ms: 500, maxMs: 500 });
    assert.equal(latencySummary([undefined, undefined]), undefined);
  });
});
