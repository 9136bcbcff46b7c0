// The packet a trace follows, and what the rules may change in it on its way (pure data).
import { canonicalIP, familyOf } from '../../../contract/base/ip-address.ts';
import type { IPFamily } from '../../../contract/base/ip-family.ts';

export type TraceProtocol = 'tcp' | 'udp' | 'sctp';

/**
 * Where the packet enters this node: from a local pod or from another machine (both arrive on an
 * interface and meet prerouting), or from a process of the node itself (output).
 */
export type TraceVia = 'pod' | 'node' | 'external';

/** The first packet of a new connection. */
export interface TracePacket {
  readonly source: string;
  readonly sourcePort: number;
  readonly destination: string;
  readonly port: number;
  readonly protocol: TraceProtocol;
  readonly via: TraceVia;
}

/** What the tracer knows about the node: which addresses are its own (routing, fib/addrtype). */
export interface TraceHost {
  readonly localAddresses: readonly string[];
}

export function packetFamily(packet: TracePacket): IPFamily {
  return familyOf(packet.destination);
}

/** True when `address` is one of the node's (loopback included), canonical comparison. */
export function isLocalAddress(host: TraceHost, address: string): boolean {
  const canonical = canonicalIP(address) ?? address;
  if (canonical === '::1' || canonical.startsWith('127.')) return true;
  return host.localAddresses.some((local) => (canonicalIP(local) ?? local) === canonical);
}

/** "10.0.0.1:80" or "[fd00::1]:80". */
export function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
