// Address arithmetic shared by the dataplanes (LoadBalancer source ranges, --nodeport-addresses).
import ipaddr from 'ipaddr.js';

/** True when `ip` lies in `cidr` (same family); false for a malformed or other-family pair. */
export function cidrContains(cidr: string, ip: string): boolean {
  if (!ipaddr.isValidCIDR(cidr) || !ipaddr.isValid(ip)) return false;
  const [network, bits] = ipaddr.parseCIDR(cidr);
  const address = ipaddr.parse(ip);
  return address.kind() === network.kind() && address.match(network, bits);
}
