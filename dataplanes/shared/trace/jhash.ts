// The kernel's nft `jhash <expr> mod N seed S` (net/netfilter/nft_hash.c, nft_jhash_eval): Bob
// Jenkins' lookup3 hash of the expression's bytes (include/linux/jhash.h, jhash()), scaled into
// [0, N) by a multiply and shift (reciprocal_scale), not by a remainder. The tracer computes it to
// predict which endpoint a client address picks.

const JHASH_INITVAL = 0xdeadbeef;

function rol32(word: number, shift: number): number {
  return ((word << shift) | (word >>> (32 - shift))) >>> 0;
}

/** The little-endian word at `at` (the kernel reads the key with __get_unaligned_cpu32 on x86). */
function word(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

/** jhash(key, length, initval) of include/linux/jhash.h. */
export function jhash(key: Uint8Array, seed: number): number {
  let a = (JHASH_INITVAL + key.length + seed) >>> 0;
  let b = a;
  let c = a;
  let at = 0;
  let length = key.length;
  while (length > 12) {
    a = (a + word(key, at)) >>> 0;
    b = (b + word(key, at + 4)) >>> 0;
    c = (c + word(key, at + 8)) >>> 0;
    // __jhash_mix
    a = ((a - c) ^ rol32(c, 4)) >>> 0;
    c = (c + b) >>> 0;
    b = ((b - a) ^ rol32(a, 6)) >>> 0;
    a = (a + c) >>> 0;
    c = ((c - b) ^ rol32(b, 8)) >>> 0;
    b = (b + a) >>> 0;
    a = ((a - c) ^ rol32(c, 16)) >>> 0;
    c = (c + b) >>> 0;
    b = ((b - a) ^ rol32(a, 19)) >>> 0;
    a = (a + c) >>> 0;
    c = ((c - b) ^ rol32(b, 4)) >>> 0;
    b = (b + a) >>> 0;
    length -= 12;
    at += 12;
  }
  if (length === 0) return c;
  // The tail's bytes, each at its shift in a, b or c (the switch's fall-through).
  const words = [a, b, c];
  for (let i = 0; i < length; i++) words[i >>> 2] = (words[i >>> 2]! + (key[at + i]! << (8 * (i & 3)))) >>> 0;
  [a, b, c] = words as [number, number, number];
  // __jhash_final
  c = ((c ^ b) - rol32(b, 14)) >>> 0;
  a = ((a ^ c) - rol32(c, 11)) >>> 0;
  b = ((b ^ a) - rol32(a, 25)) >>> 0;
  c = ((c ^ b) - rol32(b, 16)) >>> 0;
  a = ((a ^ c) - rol32(c, 4)) >>> 0;
  b = ((b ^ a) - rol32(a, 14)) >>> 0;
  c = ((c ^ b) - rol32(b, 24)) >>> 0;
  return c;
}

/** What `jhash <key> mod <modulus> seed <seed> offset <offset>` evaluates to. */
export function nftJhash(key: Uint8Array, modulus: number, seed: number, offset: number): number {
  const hash = jhash(key, seed);
  return Number((BigInt(hash) * BigInt(modulus)) >> 32n) + offset;
}
