// The tracer's set lookup by key (element-index.ts) finds what a scan in order finds, for random
// sets of keys in the spellings valueMatches equates or tells apart (addresses long and short,
// protocol numbers and names, upper case, hex), prefixes and ranges, and after the set changes in
// place as the fake kernel changes it (elements deleted, new ones appended).
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/shared/trace/element-index.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findElement } from '../../../../dataplanes/shared/trace/element-index.ts';
import { valueMatches } from '../../../../dataplanes/shared/trace/match-value.ts';
import type { NftElement } from '../../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../../support/prng.ts';
import { seedsLine, testSeeds } from '../../../support/seeds.ts';

/**
 * Values in several spellings, some of which valueMatches equates: an address long and short, in
 * upper case, a number read as an IPv4 address, a protocol's name and number, hex and decimal.
 */
const SPELLINGS: readonly (readonly string[])[] = [
  ['10.96.0.10', '10.96.0.010'],
  ['10.96.0.11'],
  ['fd00::10', 'fd00:0::10', 'FD00::10', 'fd00:0:0:0:0:0:0:10', '[fd00::10]'],
  ['tcp', 'TCP', '6', '0.0.0.6'],
  ['udp', '17'],
  ['80', '080', '0.0.0.80', '0x50'],
  ['443'],
  ['16384', '0x4000', '4294967296'],
];
const PATTERNS = ['10.96.0.0/24', '10.96.0.11-10.96.0.20', 'fd00::/64', '70-90', '0.0.0.0/0'];

function scanned(elements: readonly NftElement[], values: readonly string[]): NftElement | undefined {
  return elements.find(
    (e) => e.key.length === values.length && e.key.every((pattern, i) => valueMatches(pattern, values[i]!)),
  );
}

test('set lookups by key find the element a scan in order finds', () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('element index ≡ scan', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    const part = () => (random() < 0.15 ? pick(PATTERNS) : pick(pick(SPELLINGS)));
    const width = 1 + Math.floor(random() * 3);
    const element = (): NftElement => ({ key: Array.from({ length: width }, part) });
    // Past the size from which lookups use the index.
    const elements: NftElement[] = Array.from({ length: 64 + Math.floor(random() * 200) }, element);
    let found = 0;
    for (let round = 0; round < 4; round++) {
      for (let probe = 0; probe < 200; probe++) {
        const values = Array.from({ length: random() < 0.9 ? width : width + 1 }, () =>
          pick(pick(SPELLINGS)),
        );
        const want = scanned(elements, values);
        if (want) found++;
        assert.equal(
          findElement(elements, values),
          want,
          `seed ${seed} round ${round}: ${values.join(' . ')}`,
        );
      }
      // As nft-ruleset.ts changes a set: some deleted (the array kept), new ones appended.
      const kept = elements.filter(() => random() < 0.8);
      elements.splice(0, elements.length, ...kept);
      for (let added = Math.floor(random() * 40); added > 0; added--) elements.push(element());
    }
    assert.ok(found > 0, `seed ${seed}: no probe matched an element`);
  }
});
