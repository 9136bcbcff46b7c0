// The tracer's jhash is the kernel's: lookup3's hashlittle (include/linux/jhash.h is the same
// function), checked against the vectors its author's driver prints (lookup3.c, driver5), and
// nft's scaling into [0, N) (reciprocal_scale: a multiply and shift, not a remainder).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jhash, nftJhash } from '../../dataplanes/shared/trace/jhash.ts';

const text = (s: string) => new TextEncoder().encode(s);

test('jhash gives lookup3 driver5 vectors: empty key, 30 bytes (two mixing rounds and a tail)', () => {
  assert.equal(jhash(text(''), 0), 0xdeadbeef);
  assert.equal(jhash(text(''), 0xdeadbeef), 0xbd5b7dde);
  assert.equal(jhash(text('Four score and seven years ago'), 0), 0x17770551);
  assert.equal(jhash(text('Four score and seven years ago'), 1), 0xcd628161);
});

test('nft jhash mod N scales the hash by multiply and shift, then adds the offset', () => {
  const key = text('Four score and seven years ago');
  // 0x17770551 * 5 >> 32 = 0 (a remainder would give 3).
  assert.equal(nftJhash(key, 5, 0, 0), 0);
  // 0xcd628161 * 7 >> 32 = 5 (a remainder would give 6).
  assert.equal(nftJhash(key, 7, 1, 0), 5);
  assert.equal(nftJhash(key, 7, 1, 100), 105);
});
