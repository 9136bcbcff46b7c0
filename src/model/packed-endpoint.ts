// The model's Endpoint, packed: an IPv4 address as a number instead of its text, and the port and
// the four conditions in one integer. Node's V8 has no pointer compression, so a plain Endpoint
// object is 72 bytes plus a 32-byte address string; this one is 40 bytes (IPv6 keeps its text).
// At 300,000 endpoints that is ~19 MiB of the daemon's heap. Readers see the Endpoint interface;
// the address text is made when read, which costs ~0.1 µs.
//
// Both fields are public so that node:util's isDeepStrictEqual, which the model uses to keep
// unchanged service ports by identity, compares endpoints by value.
import type { Endpoint } from '../../contract/proxy-state.ts';

const IS_LOCAL = 1;
const READY = 2;
const SERVING = 4;
const TERMINATING = 8;
const PORT_SHIFT = 4;

export class PackedEndpoint implements Endpoint {
  /** An IPv4 address as a signed 32-bit integer (always a small integer to V8); else its text. */
  readonly address: number | string;
  /** The port above four condition bits. */
  readonly portAndFlags: number;

  /** `ip` in canonical text (contract/base/ip-address.ts). */
  constructor(ip: string, port: number, conditions: Omit<Endpoint, 'ip' | 'port'>) {
    this.address = ipv4Number(ip) ?? ip;
    this.portAndFlags =
      (port << PORT_SHIFT) |
      (conditions.isLocal ? IS_LOCAL : 0) |
      (conditions.ready ? READY : 0) |
      (conditions.serving ? SERVING : 0) |
      (conditions.terminating ? TERMINATING : 0);
  }

  get ip(): string {
    const a = this.address;
    return typeof a === 'string' ? a : `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
  }

  get port(): number {
    return this.portAndFlags >>> PORT_SHIFT;
  }

  get isLocal(): boolean {
    return (this.portAndFlags & IS_LOCAL) !== 0;
  }

  get ready(): boolean {
    return (this.portAndFlags & READY) !== 0;
  }

  get serving(): boolean {
    return (this.portAndFlags & SERVING) !== 0;
  }

  get terminating(): boolean {
    return (this.portAndFlags & TERMINATING) !== 0;
  }
}

/**
 * A canonical dotted quad as a signed 32-bit integer, read digit by digit (no array per address);
 * undefined for any other text (IPv6), which is kept as it is.
 */
function ipv4Number(ip: string): number | undefined {
  let n = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c === 46 /* . */) {
      if (digits === 0 || ++dots > 3) return undefined;
      n = (n << 8) | octet;
      octet = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57 && digits < 3) {
      octet = octet * 10 + (c - 48);
      digits++;
      // A leading zero would not come back as written.
      if (octet > 255 || (digits === 2 && octet < 10)) return undefined;
    } else return undefined;
  }
  return dots === 3 && digits > 0 ? (n << 8) | octet : undefined;
}
