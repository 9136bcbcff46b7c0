// The Maglev table of ipvs.scheduler mh in nftables mode (maglev.ts): balanced, deterministic
// whatever the endpoints' order, and an endpoint that goes or comes moves few of the others' slots.
// Random endpoint sets; sweep the seeds with
//   KPROXY_SEED=1 KPROXY_SEEDS=2000 node --test test/dataplanes/nftables/maglev.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAGLEV_SLOTS, maglevTable } from '../../../dataplanes/nftables/maglev.ts';
import { movedShare, randomEndpointNames } from '../../support/maglev-moves.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';

const SEEDS = testSeeds({ count: 200 });
process.stdout.write(seedsLine('Maglev tables of random endpoint sets', SEEDS));

/**
 * Of the slots owned by endpoints that stay, the share an endpoint's departure or arrival may move
 * to another that stays. Maglev moves some: a departure frees its slots and the others' next
 * preferences take them in turn, displacing a few. At M = 127 and 2 to 16 endpoints, over seeds
 * 1..20000 the mean is 0.068 and the worst 0.474 (a few endpoints, whose M/N shares shift most;
 * M = 251 gave 0.047 and 0.473);
 * picking by `mod N` (sh) moves about (N-1)/N of them.
 */
const MOVED_BOUND = 0.5;

function randomNames(random: () => number): string[] {
  return randomEndpointNames(random, 2 + Math.floor(random() * 15));
}

const owners = (names: readonly string[]) => maglevTable(names).map((i) => names[i]!);

test('every slot has an owner and each endpoint holds floor(M/N) or ceil(M/N) slots', () => {
  for (const seed of SEEDS) {
    const names = randomNames(prng(seed));
    const counts = new Map<string, number>();
    for (const owner of owners(names)) counts.set(owner, (counts.get(owner) ?? 0) + 1);
    assert.equal(counts.size, names.length, `seed ${seed}: every endpoint has slots`);
    const share = MAGLEV_SLOTS / names.length;
    for (const [name, count] of counts)
      assert.ok(
        count === Math.floor(share) || count === Math.ceil(share),
        `seed ${seed}: ${name} holds ${count}`,
      );
  }
});

test('the table depends on the set, not its order', () => {
  for (const seed of SEEDS) {
    const random = prng(seed);
    const names = randomNames(random);
    const shuffled = names.map((name) => ({ name, key: random() })).sort((a, b) => a.key - b.key);
    assert.deepEqual(owners(shuffled.map((s) => s.name)), owners(names), `seed ${seed}`);
  }
});

test("an endpoint leaving or arriving moves at most MOVED_BOUND of the others' slots; its own go to the others", () => {
  for (const seed of SEEDS) {
    const random = prng(seed);
    const names = randomNames(random);
    const gone = names[Math.floor(random() * names.length)]!;
    const rest = names.filter((n) => n !== gone);
    const [before, after] = [owners(names), owners(rest)];
    assert.ok(!after.includes(gone), `seed ${seed}`);
    const stayed = new Set(rest);
    const leaving = movedShare(before, after, stayed);
    assert.ok(leaving <= MOVED_BOUND, `seed ${seed}: ${gone} leaving moved ${leaving} of the others' slots`);
    // The way back: the same endpoint arriving again gives the first table back.
    assert.deepEqual(owners(names), before, `seed ${seed}: deterministic`);
    const arriving = movedShare(after, before, stayed);
    assert.ok(
      arriving <= MOVED_BOUND,
      `seed ${seed}: ${gone} arriving moved ${arriving} of the others' slots`,
    );
  }
});
