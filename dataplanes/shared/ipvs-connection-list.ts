// IPVS's connection entries as /proc/net/ip_vs_conn lists them (the kernel's ip_vs_conn_seq_show),
// for the drain of kube-proxy's IPVS leftovers (kube-proxy-leftovers.ts): which connections IPVS
// still balances to a virtual service about to go (the conntrack entry of each: ipvs-drain.ts's
// conntrackEntryOf).
//
//   Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
//   TCP 0A6400C8 A1B2 AC1E002C 0050 0AF4010A 0050 ESTABLISHED     899
//
// IPv4 addresses and ports in hex; IPv6 addresses as %pI6 (eight groups of four hex digits).
// Client (From), virtual service (To), real server (Dest). Persistence templates share the table,
// their state NONE or ASSURED (ip_vs_ctpl_state_name_table).
import { canonicalIP } from '../../contract/base/ip-address.ts';

export interface IpvsEndpoint {
  readonly address: string;
  readonly port: number;
}

export interface IpvsConnection {
  /** As IPVS names it: TCP, UDP, SCTP (others are listed too). */
  readonly protocol: string;
  readonly client: IpvsEndpoint;
  readonly virtual: IpvsEndpoint;
  readonly server: IpvsEndpoint;
  readonly state: string;
}

/** A virtual service by what identifies it to a connection (VirtualService has these fields). */
export interface VirtualServiceKey {
  readonly protocol: string;
  readonly address: string;
  readonly port: number;
}

function address(text: string): string | undefined {
  if (/^[0-9A-Fa-f]{8}$/.test(text)) {
    const value = Number.parseInt(text, 16);
    return [24, 16, 8, 0].map((shift) => (value >>> shift) & 0xff).join('.');
  }
  // %pI6, or a real server of another family in brackets on some kernels.
  return canonicalIP(text.replace(/^\[|\]$/g, ''));
}

function endpoint(addressText: string, portText: string): IpvsEndpoint | undefined {
  const parsed = address(addressText);
  const port = Number.parseInt(portText, 16);
  return parsed === undefined || !/^[0-9A-Fa-f]{1,4}$/.test(portText) ? undefined : { address: parsed, port };
}

/** The entries of /proc/net/ip_vs_conn; the header and any line not of its shape are skipped. */
export function parseIpvsConnections(text: string): IpvsConnection[] {
  const connections: IpvsConnection[] = [];
  for (const line of text.split('\n')) {
    const [protocol, ca, cp, va, vp, da, dp, state] = line.trim().split(/\s+/);
    if (protocol === undefined || protocol === 'Pro' || state === undefined) continue;
    const client = endpoint(ca!, cp!);
    const virtual = endpoint(va!, vp!);
    const server = endpoint(da!, dp!);
    if (client && virtual && server) connections.push({ protocol, client, virtual, server, state });
  }
  return connections;
}

/**
 * States in which a connection is over, or a template, not a connection (TCP, SCTP; UDP has one),
 * or not one to wait for: IPVS's TCP SYN_SENT (a SYN it saw going out, never a client's handshake
 * into a virtual service, which is SYN_RECV) was seen in the VM for probes' entries that stayed
 * through their 2-minute timeout while nftables DNATed every new connection, holding a drain to
 * its bound; cutting one costs no established connection.
 */
const ENDED_STATES = new Set(['TIME_WAIT', 'CLOSE', 'CLOSED', 'REJECTED', 'NONE', 'ASSURED', 'SYN_SENT']);

/**
 * Whether the drain waits for this connection: a TCP or SCTP connection that has not ended. UDP
 * has no end to wait for: kube-proxy's graceful termination does not wait for it either
 * (IsRsGracefulTerminationNeeded), and a UDP flow moves to the new rules once its conntrack
 * entry goes.
 */
export function isLive(connection: IpvsConnection): boolean {
  return (
    (connection.protocol === 'TCP' || connection.protocol === 'SCTP') && !ENDED_STATES.has(connection.state)
  );
}

/** The connections IPVS balances to one of `services` (templates and other services' left out). */
export function connectionsTo(
  connections: readonly IpvsConnection[],
  services: readonly VirtualServiceKey[],
): IpvsConnection[] {
  const keys = new Set(services.map((s) => `${s.protocol} ${canonicalIP(s.address) ?? s.address} ${s.port}`));
  return connections.filter(
    (c) =>
      !ENDED_STATES.has(c.state) &&
      keys.has(`${c.protocol} ${c.virtual.address} ${c.virtual.port}`) &&
      c.client.port !== 0,
  );
}

function hostPort({ address, port }: IpvsEndpoint): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

/** One line for a person: "TCP 10.100.0.200:40000 -> 172.30.0.44:80 (10.244.1.10:80, ESTABLISHED)". */
export function describeConnection(c: IpvsConnection): string {
  return `${c.protocol} ${hostPort(c.client)} -> ${hostPort(c.virtual)} (${hostPort(c.server)}, ${c.state})`;
}
