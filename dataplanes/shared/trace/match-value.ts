// Comparing what a packet carries with what a rule or set element names, the way the kernel
// compares them: addresses by value (a prefix or range contains), protocols by name or number,
// ports and marks as numbers. A trace compares the packet with every element of a map, so
// parsed values are remembered (the same few hundred texts come again and again).
import ipaddr from 'ipaddr.js';

const PROTOCOL_NUMBERS: Readonly<Record<string, string>> = { '6': 'tcp', '17': 'udp', '132': 'sctp' };

interface Scalar {
  readonly value: bigint;
  /** Bits of an address (32 or 128); 0 for a plain number. */
  readonly width: number;
}

/** Parsed texts; cleared when large, so a long-lived reader holds a bounded amount. */
const parsed = new Map<string, Scalar | null>();
const MAX_REMEMBERED = 100_000;

function parse(text: string): Scalar | null {
  const bare = text.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(bare)) {
    const bytes = ipaddr.parse(bare).toByteArray();
    return {
      value: bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n),
      width: bytes.length * 8,
    };
  }
  if (/^(0x[\da-f]+|\d+)$/i.test(text)) return { value: BigInt(text), width: 0 };
  return null;
}

function scalar(text: string): Scalar | null {
  let value = parsed.get(text);
  if (value === undefined) {
    if (parsed.size >= MAX_REMEMBERED) parsed.clear();
    value = parse(text);
    parsed.set(text, value);
  }
  return value;
}

/**
 * `address/bits`, or `address/mask` with the mask an address (iptables' any mask, e.g. the low bits
 * `0.0.3.255/0.0.3.255`), contains `actual` (same family only).
 */
function prefixContains(pattern: string, actual: string): boolean {
  const slash = pattern.indexOf('/');
  const [network, value] = [scalar(pattern.slice(0, slash)), scalar(actual)];
  if (!network?.width || network.width !== value?.width) return false;
  const mask = maskOf(pattern.slice(slash + 1), network.width);
  return mask !== undefined && (network.value & mask) === (value.value & mask);
}

function maskOf(text: string, width: number): bigint | undefined {
  // A bare number is a prefix length, though ipaddr.js would also read "16" as an IPv4 address.
  if (/[.:]/.test(text)) {
    const address = scalar(text);
    return address?.width === width ? address.value : undefined;
  }
  const bits = Number(text);
  if (!(Number.isInteger(bits) && bits >= 0 && bits <= width)) return undefined;
  return ((1n << BigInt(bits)) - 1n) << BigInt(width - bits);
}

/** Normal form of a symbolic value: protocol numbers as names, lower case. */
function symbol(text: string): string {
  const lower = text.toLowerCase();
  return PROTOCOL_NUMBERS[lower] ?? lower;
}

/** True when `actual` (what the packet has) is `pattern`, or lies in its prefix or range. */
export function valueMatches(pattern: string, actual: string): boolean {
  if (pattern === actual) return true;
  if (pattern.includes('/')) return prefixContains(pattern, actual);
  const range = pattern.match(/^(.+?)-(.+)$/);
  if (range && !/^[a-z]/i.test(pattern)) {
    const [low, high, value] = [scalar(range[1]!), scalar(range[2]!), scalar(actual)];
    if (low && high && value) return value.value >= low.value && value.value <= high.value;
  }
  const [left, right] = [scalar(pattern), scalar(actual)];
  if (left && right) return left.value === right.value && left.width === right.width;
  return symbol(pattern) === symbol(actual);
}

/**
 * Keys such that `pattern` and `actual` share one exactly when valueMatches(pattern, actual), for
 * texts that are not prefixes or ranges (undefined: only a scan may compare those). A value is its
 * number and width; a name is its lower case; a protocol's number is both (it equals its name).
 * What lets set lookups find an element by key instead of comparing every one (element-index.ts).
 */
export function exactKeys(text: string): readonly string[] | undefined {
  if (text.includes('/')) return undefined;
  if (/^(.+?)-(.+)$/.test(text) && !/^[a-z]/i.test(text)) return undefined;
  const lower = text.toLowerCase();
  const value = scalar(text);
  if (value === null) return [`=${lower}`];
  const name = PROTOCOL_NUMBERS[lower];
  return name === undefined
    ? [`${value.width}:${value.value}`]
    : [`${value.width}:${value.value}`, `=${name}`];
}
