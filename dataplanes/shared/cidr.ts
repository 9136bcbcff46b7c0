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
