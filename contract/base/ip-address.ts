// Strict IP and CIDR parsing into the canonical text every later stage compares and prints.
// ipaddr.js alone accepts legacy IPv4 forms ("10.1", "0x0a.0.0.1") and IPv6 zone ids that
// Kubernetes rejects, hence the extra checks.
import ipaddr from 'ipaddr.js';
import type { IPFamily } from './ip-family.ts';

// Canonical dotted-quad IPv4 (no leading zeros): the common case, checked without parsing.
const CANONICAL_IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * The canonical text of an IP address (dotted quad; RFC 5952 lower-case compressed IPv6), or
 * undefined when the text is not an IP address Kubernetes would accept. IPv4 octets with leading
 * zeros are accepted as the API server's legacy parser does ("010.0.0.1" → "10.0.0.1");
 * IPv4-mapped IPv6 and zone ids are not.
 */
export function canonicalIP(text: string): string | undefined {
  if (CANONICAL_IPV4.test(text)) return text;
  if (text.includes(':')) {
    if (text.includes('%') || !ipaddr.IPv6.isValid(text)) return undefined;
    const address = ipaddr.IPv6.parse(text);
    return address.isIPv4MappedAddress() ? undefined : address.toString();
  }
  if (!/^\d{1,3}(?:\.\d{1,3}){3}$/.test(text)) return undefined;
  const octets = text.split('.').map(Number);
  return octets.every((octet) => octet <= 255) ? octets.join('.') : undefined;
}

/**
 * The canonical text of a CIDR with its host bits cleared ("10.1.2.3/8" → "10.0.0.0/8"), or
 * undefined when the text is not a CIDR.
 */
export function canonicalCIDR(text: string): string | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = canonicalIP(text.slice(0, slash));
  const bitsText = text.slice(slash + 1);
  if (ip === undefined || !/^\d{1,3}$/.test(bitsText)) return undefined;
  const bits = Number(bitsText);
  const v6 = ip.includes(':');
  if (bits > (v6 ? 128 : 32)) return undefined;
  const network = v6
    ? ipaddr.IPv6.networkAddressFromCIDR(`${ip}/${bits}`)
    : ipaddr.IPv4.networkAddressFromCIDR(`${ip}/${bits}`);
  return `${network.toString()}/${bits}`;
}

/** The family of an IP or CIDR already in canonical form. */
export function familyOf(canonical: string): IPFamily {
  return canonical.includes(':') ? 'IPv6' : 'IPv4';
}
