// The drain before IPVS virtual services go: kube-proxy's (kube-proxy-leftovers.ts) or kproxy's own
// IPVS mode's when another mode or proxy took over (dataplanes/ipvs/live.ts cleanup). A connection
// IPVS balances keeps going through IPVS (its conntrack entry has no NAT, so kproxy's DNAT never
// sees it) only while its virtual service is there and kube-ipvs0 holds the address: deleting the
// service makes IPVS drop its packets, deleting the link routes them away, and the conntrack entry,
// refreshed by each packet, keeps the flow from reaching kproxy's rules. So the cleanup waits while
// IPVS balances a live TCP or SCTP connection (ipvs-connection-list.ts) to one of the services, up
// to a bound, and once they are gone deletes the conntrack entries of those it cut: a UDP flow,
// or a TCP connection held past the bound, meets kproxy's rules at its next packet (UDP is
// balanced afresh, TCP is reset by the endpoint that has no such connection) instead of being
// black-holed.
//
// IPVS's list alone can keep a drain waiting for nothing. IPVS finds the connection a reply belongs
// to by client address and port and real server, whatever the virtual service (ip_vs_conn_out_get),
// and moves that connection's state with it. When the client reuses its port for a connection that
// kproxy's DNAT sends to the same backend, that connection's replies move the old IPVS connection
// on: from TIME_WAIT to SYN_SENT (not waited for), but from SYN_RECV (a handshake its backend never
// answered) or a live state to ESTABLISHED, where IPVS keeps it 15 minutes. So each read also looks
// the live ones up in conntrack (one batched read per poll), whose entry, keyed by the whole
// original tuple, no other connection moves (confirmedByConntrack).
import { canonicalIP } from '../../contract/base/ip-address.ts';
import type { CommandRunner } from './command-runner.ts';
import {
  type ConntrackDeleter,
  type ConntrackTuple,
  type DecodedEntry,
  type ExactEntry,
  IPS_DST_NAT,
} from './conntrack/conntrack-netlink.ts';
import {
  connectionsTo,
  describeConnection,
  type IpvsConnection,
  isLive,
  parseIpvsConnections,
  type VirtualServiceKey,
} from './ipvs-connection-list.ts';

/** The default bound of the drain (`--ipvs-drain-timeout`); the CLI's usage text says why 2 min. */
export const DEFAULT_IPVS_DRAIN_MS = 120_000;

/** How often the connection list is read while draining. */
const POLL_MS = 1_000;

/**
 * A drain's options with its bound (`--ipvs-drain-timeout`) DEFAULT_IPVS_DRAIN_MS when absent; its
 * conntrack is removeAfterDrain's.
 */
export type DrainBound = Omit<DrainOptions, 'timeoutMs' | 'conntrack'> & { readonly timeoutMs?: number };

export interface DrainOptions {
  /** How long to wait at most for live connections to end; 0 cuts them at once. */
  readonly timeoutMs: number;
  /**
   * The namespace's conntrack table, to check the connections IPVS lists as live against
   * (confirmedByConntrack); without it the drain goes by IPVS's list alone.
   */
  readonly conntrack?: Pick<ConntrackDeleter, 'readEntries'>;
  /** Told what the drain waits for, each time that changes, and how it ended. */
  readonly report: (line: string) => void;
  /** Test seams: the clock and the wait between reads. */
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/** The IPVS connections of this namespace; none when ip_vs keeps no list (not loaded). */
export async function readIpvsConnections(runner: CommandRunner): Promise<IpvsConnection[]> {
  const listed = await runner.run('cat', ['/proc/net/ip_vs_conn']);
  return listed.exitCode === 0 ? parseIpvsConnections(listed.stdout) : [];
}

/** conntrack's TCP states (enum tcp_conntrack) of a connection not to wait for. */
const TCP_SYN_SENT = 1;
const TCP_TIME_WAIT = 7;
const TCP_CLOSE = 8;

/**
 * Whether `entry`, the conntrack entry of the original tuple of a connection IPVS lists as live
 * (undefined: none), shows that connection going on: only then does the drain wait for it.
 * - None: IPVS's conntrack=1 (kube-proxy's, kproxy's) gives each IPVS connection one, and without
 *   it the connection's next packet is a new one to conntrack and meets the new rules anyway.
 * - A DNAT's (IPS_DST_NAT): the client reused the port to the same Service address and kproxy's
 *   rules took it. IPVS never sets it: it rewrites only the reply tuple (nf_conntrack_alter_reply),
 *   and no DNAT rule meets the connections it balances (ipvs-drain.vmtest.ts checks both).
 * - Replies from another source than the real server: not IPVS's connection.
 * - TCP over (TIME_WAIT, CLOSE) or never answered (SYN_SENT): what IPVS lists is moved by another
 *   connection's replies; cutting a handshake costs nothing, its next SYN meets the new rules.
 */
export function confirmedByConntrack(connection: IpvsConnection, entry: DecodedEntry | undefined): boolean {
  if (entry === undefined || (entry.status & IPS_DST_NAT) !== 0) return false;
  const from = entry.reply.source;
  if ((canonicalIP(from.address) ?? from.address) !== connection.server.address) return false;
  if (from.port !== connection.server.port) return false;
  return !(
    connection.protocol === 'TCP' &&
    entry.tcpState !== undefined &&
    [TCP_SYN_SENT, TCP_TIME_WAIT, TCP_CLOSE].includes(entry.tcpState)
  );
}

/** The connections of `listed` (TCP, SCTP, live to IPVS) whose conntrack entries bear them out. */
async function confirmedLive(
  listed: readonly IpvsConnection[],
  conntrack: DrainOptions['conntrack'],
): Promise<IpvsConnection[]> {
  const live = listed.filter(isLive);
  if (live.length === 0 || conntrack?.readEntries === undefined) return live;
  const entries = await conntrack.readEntries(live.map(tupleOf));
  return live.filter((connection, i) => confirmedByConntrack(connection, entries[i]));
}

/**
 * Waits while IPVS balances a live connection to one of `services` (one that conntrack, when
 * given, bears out), at most `timeoutMs`, reading the connection list every POLL_MS; returns the
 * connections to them its last read found (none live when they all ended): read just now, their
 * exact tuples are those to cut.
 */
export async function drainIpvsConnections(
  runner: CommandRunner,
  services: readonly VirtualServiceKey[],
  options: DrainOptions,
): Promise<IpvsConnection[]> {
  const now = options.now ?? (() => performance.now());
  const sleep = options.sleep ?? ((ms: number) => new Promise((resolve) => setTimeout(resolve, ms)));
  const started = now();
  let waitingFor = '';
  for (;;) {
    const connections = connectionsTo(await readIpvsConnections(runner), services);
    const live = await confirmedLive(connections, options.conntrack);
    const elapsed = now() - started;
    if (live.length === 0) {
      if (waitingFor !== '') options.report(`IPVS drain: no live connection left after ${seconds(elapsed)}`);
      return connections;
    }
    if (elapsed >= options.timeoutMs) {
      options.report(
        `IPVS drain: ${live.length} connection(s) still live at the bound (${seconds(options.timeoutMs)}), cut`,
      );
      return connections;
    }
    const listed = live.map(describeConnection).join('\n  ');
    if (listed !== waitingFor) {
      const left = seconds(options.timeoutMs - elapsed);
      options.report(
        `IPVS drain: waiting up to ${left} for ${live.length} connection(s) to end:\n  ${listed}`,
      );
      waitingFor = listed;
    }
    await sleep(Math.min(POLL_MS, options.timeoutMs - elapsed));
  }
}

/** IP protocol numbers of what IPVS balances. */
const PROTOCOL_NUMBERS: ReadonlyMap<string, number> = new Map([
  ['TCP', 6],
  ['UDP', 17],
  ['SCTP', 132],
]);

/**
 * The conntrack entry of one IPVS connection (net.ipv4.vs.conntrack=1 gives each one): its
 * original tuple, client to virtual service, deleted only while its replies come from the real
 * server (IPVS rewrites the reply tuple to it) and no DNAT made it. Never the destination alone:
 * kproxy's rules DNAT new connections to the same Service addresses, and those entries must stay,
 * even one of the listed tuple (the client's port reused) DNATed to the same real server, whose
 * replies IPVS counts as the listed connection's.
 */
export function conntrackEntryOf(connection: IpvsConnection): ExactEntry {
  return { ...tupleOf(connection), replySource: connection.server };
}

/** The original tuple of an IPVS connection's conntrack entry: client to virtual service. */
function tupleOf(connection: IpvsConnection): ConntrackTuple {
  const protocol = PROTOCOL_NUMBERS.get(connection.protocol);
  if (protocol === undefined) throw new Error(`IPVS connection of protocol ${connection.protocol}`);
  return { protocol, source: connection.client, destination: connection.virtual };
}

/**
 * Deletes the conntrack entries of `cut` (the connections IPVS balanced when its services went),
 * by exact tuple; returns how many went. One that ended meanwhile has none left, which is fine.
 */
export function deleteCutConntrackEntries(
  deleter: ConntrackDeleter,
  cut: readonly IpvsConnection[],
): Promise<number> {
  return deleter.deleteEntries(cut.map(conntrackEntryOf));
}

/**
 * The drain, then `remove` (the virtual services and the link that holds their addresses), then
 * the conntrack entries of the connections IPVS still balanced to the services it removed when
 * they went (the drain's last read, just before `remove`: exact tuples), by `conntrack`, which
 * works in the namespace of `services`. `remove` returns the services it left in place: another
 * owner took them over during the drain, and the connections IPVS balances to them go on. What it
 * deleted, as cleanup reports it; none when it cut nothing.
 */
export async function removeAfterDrain(
  runner: CommandRunner,
  services: readonly VirtualServiceKey[],
  { drain, conntrack }: { readonly drain: DrainBound; readonly conntrack: ConntrackDeleter | undefined },
  remove: () => Promise<readonly VirtualServiceKey[]>,
): Promise<string[]> {
  const cut =
    services.length === 0
      ? []
      : await drainIpvsConnections(runner, services, {
          conntrack,
          ...drain,
          timeoutMs: drain.timeoutMs ?? DEFAULT_IPVS_DRAIN_MS,
        });
  // Checked before anything goes: failing after `remove` would leave the cut connections'
  // entries routed away, with nothing left to say which they were.
  if (cut.length > 0 && conntrack === undefined)
    throw new Error(`${cut.length} IPVS connection(s) to cut, and no conntrack deleter given`);
  const kept = await remove();
  const removed = kept.length === 0 ? cut : cut.filter((c) => connectionsTo([c], kept).length === 0);
  if (removed.length === 0 || conntrack === undefined) return [];
  const deleted = await deleteCutConntrackEntries(conntrack, removed);
  return [
    `conntrack: ${deleted} entr${deleted === 1 ? 'y' : 'ies'} of ${removed.length} cut IPVS connection(s)`,
  ];
}

function seconds(ms: number): string {
  return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
}
