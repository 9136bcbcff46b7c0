// Comparing what a packet carries with what a rule or set element names, the way the kernel
// compares them: addresses by value (a prefix or range contains), protocols by name or number,
// ports and marks as numbers.
import ipaddr from 'ipaddr.js';
import { cidrContains } from '../cidr.ts';

const PROTOCOL_NUMBERS: Readonly<Record<string, string>> = { '6': 'tcp', '17': 'udp', '132': 'sctp' };

function addressValue(text: string): bigint | undefined {
  const bare = text.replace(/^\[|\]$/g, '');
  if (!ipaddr.isValid(bare)) return undefined;
  return ipaddr
    .parse(bare)
    .toByteArray()
    .reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

function scalar(text: string): bigint | undefined {
  const address = addressValue(text);
  if (address !== undefined) return address;
  if (/^(0x[\da-f]+|\d+)$/i.test(text)) return BigInt(text);
  return undefined;
}

/** Normal form of a symbolic value: protocol numbers as names, lower case. */
function symbol(text: string): string {
  const lower = text.toLowerCase();
  return PROTOCOL_NUMBERS[lower] ?? lower;
}

/** True when `actual` (what the packet has) is `pattern`, or lies in its prefix or range. */
export function valueMatches(pattern: string, actual: string): boolean {
  if (pattern.includes('/')) return cidrContains(pattern, actual);
  const range = pattern.match(/^(.+?)-(.+)$/);
  if (range && !/^[a-z]/i.test(pattern)) {
    const [low, high, value] = [scalar(range[1]!), scalar(range[2]!), scalar(actual)];
    if (low !== undefined && high !== undefined && value !== undefined) return value >= low && value <= high;
  }
  const [left, right] = [scalar(pattern), scalar(actual)];
  if (left !== undefined && right !== undefined) return left === right;
  return symbol(pattern) === symbol(actual);
}
