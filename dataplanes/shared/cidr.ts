// Address arithmetic shared by the dataplanes (LoadBalancer source ranges, --nodeport-addresses).
import ipaddr from 'ipaddr.js';

/** True when `ip` lies in `cidr` (same family); false for a malformed or other-family pair. */
export function cidrContains(cidr: string, ip: string): boolean {
  if (!ipaddr.isValidCIDR(cidr) || !ipaddr.isValid(ip)) return false;
  const [network, bits] = ipaddr.parseCIDR(cidr);
  const address = ipaddr.parse(ip);
  return address.kind() === network.kind() && address.match(network, bits);
}

/**
 * cidrContains for many addresses against the same CIDRs: each CIDR is parsed once (the conntrack
 * reconciler asks for every flow of a dump). Malformed CIDRs and addresses match nothing.
 */
export function cidrMatcher(cidrs: readonly string[]): (ip: string) => boolean {
  const parsed = cidrs.filter((cidr) => ipaddr.isValidCIDR(cidr)).map((cidr) => ipaddr.parseCIDR(cidr));
  if (parsed.length === 0) return () => false;
  return (ip) => {
    if (!ipaddr.isValid(ip)) return false;
    const address = ipaddr.parse(ip);
    return parsed.some(
      ([network, bits]) => address.kind() === network.kind() && address.match(network, bits),
    );
  };
}

/**
 * The entries of `cidrs` (CIDRs or plain addresses, either family) that no other entry contains,
 * in their order: the same union without overlaps, which an nft interval set needs (it refuses a
 * range inside another with "File exists", and the whole transaction with it, so one Service's
 * `loadBalancerSourceRanges: [10.0.0.0/8, 10.1.0.0/16]` would stop every sync). CIDRs nest or are
 * disjoint, so one pass in start order, widest first, finds the covered ones: O(n log n), as a
 * Service may carry tens of thousands. An entry that does not parse is kept as it is.
 */
export function uncoveredRanges(cidrs: readonly string[]): string[] {
  const ranges: { index: number; v6: boolean; start: bigint; end: bigint }[] = [];
  const kept = new Set<number>();
  cidrs.forEach((cidr, index) => {
    const range = addressRange(cidr);
    if (range) ranges.push({ index, ...range });
    else kept.add(index);
  });
  // By family, then start, the widest first (equal ones in input order: the first is kept).
  ranges.sort(
    (a, b) =>
      Number(a.v6) - Number(b.v6) ||
      compareBigInt(a.start, b.start) ||
      compareBigInt(b.end, a.end) ||
      a.index - b.index,
  );
  let coverEnd = -1n;
  let coverV6 = false;
  for (const range of ranges) {
    if (range.v6 !== coverV6) {
      coverV6 = range.v6;
      coverEnd = -1n;
    }
    if (range.start <= coverEnd) continue;
    kept.add(range.index);
    coverEnd = range.end;
  }
  return cidrs.filter((_, index) => kept.has(index));
}

function compareBigInt(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function addressRange(cidr: string): { v6: boolean; start: bigint; end: bigint } | undefined {
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  let bits: number;
  if (ipaddr.isValidCIDR(cidr)) [address, bits] = ipaddr.parseCIDR(cidr);
  else if (ipaddr.isValid(cidr)) {
    address = ipaddr.parse(cidr);
    bits = address.kind() === 'ipv6' ? 128 : 32;
  } else return undefined;
  const width = address.kind() === 'ipv6' ? 128 : 32;
  let value = 0n;
  for (const byte of address.toByteArray()) value = (value << 8n) | BigInt(byte);
  const size = 1n << BigInt(width - bits);
  const start = value - (value % size);
  return { v6: width === 128, start, end: start + size - 1n };
}
