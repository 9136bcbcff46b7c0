// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/shared/cidr.test.ts --name 'random nested'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import ipaddr from 'ipaddr.js';
import { uncoveredRanges } from '../../../dataplanes/shared/cidr.ts';
import { prng } from '../../support/prng.ts';
import { testSeeds } from '../../support/seeds.ts';

test('ranges and addresses inside another range are left out, the rest kept in their order', () => {
  assert.deepEqual(
    uncoveredRanges([
      '10.1.0.0/16',
      '192.168.1.0/24',
      '10.0.0.0/8',
      '10.1.2.3',
      '192.168.0.0/16',
      '172.16.0.0/12',
      '10.0.0.0/8',
    ]),
    ['10.0.0.0/8', '192.168.0.0/16', '172.16.0.0/12'],
  );
  // The whole family holds everything of it, and nothing of the other family.
  assert.deepEqual(uncoveredRanges(['203.0.113.7', '0.0.0.0/0', 'fd00::/8', 'fd00:1::1', '::/0']), [
    '0.0.0.0/0',
    '::/0',
  ]);
  // Disjoint neighbours both stay: together they are one range, but neither holds the other.
  assert.deepEqual(uncoveredRanges(['10.0.0.0/9', '10.128.0.0/9']), ['10.0.0.0/9', '10.128.0.0/9']);
  assert.deepEqual(uncoveredRanges(['not a range', '10.0.0.0/8']), ['not a range', '10.0.0.0/8']);
});

test('random nested ranges: every one held by a kept one, and no kept one inside another (a quadratic check)', () => {
  for (const seed of testSeeds({ first: 20261203 })) {
    const random = prng(seed);
    for (let round = 0; round < 200; round++) {
      const v6 = random() < 0.3;
      const cidrs = Array.from({ length: 1 + Math.floor(random() * 40) }, () => {
        const width = v6 ? 128 : 32;
        const bits = width - Math.floor(random() * 10);
        const host = Math.floor(random() * 1024);
        const address = v6 ? `fd00::${host.toString(16)}` : `10.0.${host >> 8}.${host & 255}`;
        if (random() < 0.2) return address;
        const network = (v6 ? ipaddr.IPv6 : ipaddr.IPv4).networkAddressFromCIDR(`${address}/${bits}`);
        return `${network.toString()}/${bits}`;
      });
      const kept = uncoveredRanges(cidrs);
      for (const cidr of cidrs)
        assert.ok(
          kept.some((k) => k === cidr || holds(k, cidr)),
          `seed ${seed}, ${cidr} kept: ${kept}`,
        );
      for (const a of kept)
        for (const b of kept) if (a !== b) assert.ok(!holds(a, b), `seed ${seed}, ${b} inside ${a}: ${kept}`);
      assert.equal(new Set(kept).size, kept.length, 'no duplicates');
    }
  }
});

/** `outer` holds all of `inner` (a quadratic, obviously right check). */
function holds(outer: string, inner: string): boolean {
  const [address, bits] = inner.includes('/') ? ipaddr.parseCIDR(inner) : [ipaddr.parse(inner), undefined];
  const width = address.kind() === 'ipv6' ? 128 : 32;
  if (!outer.includes('/'))
    return !inner.includes('/') || bits === width ? outer === address.toString() : false;
  const [network, outerBits] = ipaddr.parseCIDR(outer);
  return (
    network.kind() === address.kind() && (bits ?? width) >= outerBits && address.match(network, outerBits)
  );
}
