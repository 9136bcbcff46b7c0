// Address arithmetic the iptables rules need (LoadBalancer source ranges, --nodeport-addresses).
import ipaddr from 'ipaddr.js';

/** True when `ip` lies in `cidr` (same family); false for a malformed or other-family pair. */
export function cidrContains(cidr: string, ip: string): boolean {
  if (!ipaddr.isValidCIDR(cidr) || !ipaddr.isValid(ip)) return false;
  const [network, bits] = ipaddr.parseCIDR(cidr);
  const address = ipaddr.parse(ip);
  return address.kind() === network.kind() && address.match(network, bits);
}

export function isLoopback(ip: string): boolean {
  return ipaddr.isValid(ip) && ipaddr.parse(ip).range() === 'loopback';
}
