import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CommandResult, CommandRunner } from '../../../dataplanes/shared/command-runner.ts';
import type {
  ConntrackTuple,
  DecodedEntry,
  ExactEntry,
} from '../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { type IpvsConnection, isLive } from '../../../dataplanes/shared/ipvs-connection-list.ts';
import {
  confirmedByConntrack,
  conntrackEntryOf,
  drainIpvsConnections,
} from '../../../dataplanes/shared/ipvs-drain.ts';
import { removeKubeProxyLeftovers } from '../../../dataplanes/shared/kube-proxy-leftovers.ts';

const HEADER = 'Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n';
/** 10.100.0.200:40000 -> 10.20.30.41:80 via 10.244.1.10:80, in `state`. */
const tcp = (state: string) => `TCP 0A6400C8 9C40 0A141E29 0050 0AF4010A 0050 ${state}     899\n`;
/** 10.100.0.200:40001 -> 10.20.30.41:80 via 10.244.1.10:80, in `state`. */
const tcp2 = (state: string) => `TCP 0A6400C8 9C41 0A141E29 0050 0AF4010A 0050 ${state}     899\n`;
/** 10.100.0.200:54321 -> 10.20.30.42:53 via 10.244.1.11:53. */
const UDP = 'UDP 0A6400C8 D431 0A141E2A 0035 0AF4010B 0035 UDP             299\n';
const SERVICES = [
  { protocol: 'TCP', address: '10.20.30.41', port: 80 },
  { protocol: 'UDP', address: '10.20.30.42', port: 53 },
];

/**
 * A node whose /proc/net/ip_vs_conn reads `lists` in turn (the last one from then on), with
 * kube-ipvs0 and nothing of iptables, ipset or nft. `calls` records every command in order.
 */
function node(lists: string[]) {
  const calls: string[] = [];
  const runner: CommandRunner = {
    async run(command, args): Promise<CommandResult> {
      calls.push([command, ...args].join(' '));
      if (command === 'cat')
        return { stdout: HEADER + (lists.length > 1 ? lists.shift()! : lists[0]!), stderr: '', exitCode: 0 };
      if (command === 'ip') return { stdout: '', stderr: '', exitCode: 0 };
      return { stdout: '', stderr: 'not found', exitCode: 127 };
    },
  };
  return { runner, calls };
}

/** IPVS listing SERVICES, whose deletions go to `deleted` (their addresses). */
function recordingIpvs(deleted: string[]) {
  return {
    listServices: async () => SERVICES,
    deleteService: async (service: { readonly address: string }) => {
      deleted.push(service.address);
      return true;
    },
    close: () => {},
  };
}

/** A conntrack deleter whose deletions go to `entries`, each found. */
function recordingConntrack(entries: ExactEntry[]) {
  return {
    async deleteEntries(cut: readonly ExactEntry[]) {
      entries.push(...cut);
      return cut.length;
    },
  };
}

/** A clock the drain's sleeps advance. */
function clock() {
  let now = 0;
  return {
    now: () => now,
    sleep: async (ms: number) => {
      now += ms;
    },
  };
}

test('the drain waits while a TCP connection is live, says what for, and ends when it ends', async () => {
  const { runner } = node([
    tcp('ESTABLISHED') + UDP,
    tcp('ESTABLISHED') + UDP,
    tcp('FIN_WAIT') + UDP,
    tcp('TIME_WAIT') + UDP,
  ]);
  const reported: string[] = [];
  const ended = await drainIpvsConnections(runner, SERVICES, {
    timeoutMs: 60_000,
    report: (l) => reported.push(l),
    ...clock(),
  });
  assert.deepEqual(
    ended.map((c) => c.state),
    ['UDP'],
    'its last read: the tuples to cut',
  );
  assert.deepEqual(reported, [
    'IPVS drain: waiting up to 60.0 s for 1 connection(s) to end:\n  TCP 10.100.0.200:40000 -> 10.20.30.41:80 (10.244.1.10:80, ESTABLISHED)',
    'IPVS drain: waiting up to 58.0 s for 1 connection(s) to end:\n  TCP 10.100.0.200:40000 -> 10.20.30.41:80 (10.244.1.10:80, FIN_WAIT)',
    'IPVS drain: no live connection left after 3.0 s',
  ]);
});

test('the drain does not wait for UDP, and stops at its bound', async () => {
  const udpOnly: string[] = [];
  const udp = await drainIpvsConnections(node([UDP]).runner, SERVICES, {
    timeoutMs: 60_000,
    report: (l) => udpOnly.push(l),
    ...clock(),
  });
  assert.equal(udp.filter(isLive).length, 0);
  assert.deepEqual(udpOnly, []);
  const reported: string[] = [];
  const time = clock();
  const ended = await drainIpvsConnections(node([tcp('ESTABLISHED')]).runner, SERVICES, {
    timeoutMs: 2_500,
    report: (l) => reported.push(l),
    ...time,
  });
  assert.equal(ended.filter(isLive).length, 1);
  assert.equal(time.now(), 2_500);
  assert.equal(reported.at(-1), 'IPVS drain: 1 connection(s) still live at the bound (2.5 s), cut');
});

test('kube-proxy IPVS leftovers: rules first, then the drain, the services, kube-ipvs0, then the cut connections’ conntrack entries', async () => {
  const { runner, calls } = node([tcp('ESTABLISHED') + UDP, tcp('ESTABLISHED') + UDP]);
  const deleted: string[] = [];
  const entries: ExactEntry[] = [];
  const removed = await removeKubeProxyLeftovers(runner, {
    openIpvs: async () => ({
      listServices: async () => SERVICES,
      deleteService: async (s) => {
        calls.push(`delete service ${s.protocol} ${s.address}:${s.port}`);
        deleted.push(s.address);
        return true;
      },
      close: () => {},
    }),
    // The kernel had an entry for one of the two: the other flow ended meanwhile.
    conntrack: {
      async deleteEntries(cut) {
        calls.push('conntrack delete');
        entries.push(...cut);
        return 1;
      },
    },
    drain: { timeoutMs: 1_000, report: () => {}, ...clock() },
  });
  const order = calls.map((c) => c.split(' ').slice(0, 2).join(' '));
  const first = (prefix: string) => order.findIndex((c) => c.startsWith(prefix));
  const last = (prefix: string) => order.findLastIndex((c) => c.startsWith(prefix));
  assert.ok(last('iptables-legacy-save') < first('nft delete'), calls.join('\n'));
  assert.ok(last('nft delete') < first('cat /proc/net/ip_vs_conn'), calls.join('\n'));
  assert.ok(last('cat') < first('delete service'), calls.join('\n'));
  assert.ok(last('delete service') < first('ip link'), calls.join('\n'));
  assert.ok(last('ip link') < first('conntrack delete'), calls.join('\n'));
  assert.ok(last('conntrack') < first('ipset list'), calls.join('\n'));
  // Both connections cut, in one call, each by its own tuple and real server: the live TCP one
  // and the UDP flow.
  assert.equal(calls.filter((c) => c.startsWith('conntrack')).length, 1, calls.join('\n'));
  assert.deepEqual(entries, [
    {
      protocol: 6,
      source: { address: '10.100.0.200', port: 40000 },
      destination: { address: '10.20.30.41', port: 80 },
      replySource: { address: '10.244.1.10', port: 80 },
    },
    {
      protocol: 17,
      source: { address: '10.100.0.200', port: 54321 },
      destination: { address: '10.20.30.42', port: 53 },
      replySource: { address: '10.244.1.11', port: 53 },
    },
  ]);
  assert.deepEqual(deleted, ['10.20.30.41', '10.20.30.42']);
  assert.deepEqual(removed, [
    'IPVS: 2 virtual service(s)',
    'link kube-ipvs0',
    'conntrack: 1 entry of 2 cut IPVS connection(s)',
  ]);
});

test('kube-proxy IPVS leftovers: the virtual services kproxy’s IPVS mode took over stay, with their connections, undrained', async () => {
  const { runner } = node([tcp('ESTABLISHED') + UDP]);
  const deleted: string[] = [];
  const reported: string[] = [];
  const entries: ExactEntry[] = [];
  const removed = await removeKubeProxyLeftovers(runner, {
    openIpvs: async () => recordingIpvs(deleted),
    conntrack: recordingConntrack(entries),
    drain: { timeoutMs: 1_000, report: (line) => reported.push(line), ...clock() },
    kproxyOwns: async () => (service) => service.address === '10.20.30.41',
  });
  // The live TCP connection is to kproxy's service now: nothing waits for it, nothing cuts it.
  assert.deepEqual(reported, []);
  assert.deepEqual(deleted, ['10.20.30.42']);
  assert.deepEqual(
    entries.map((e) => e.destination.address),
    ['10.20.30.42'],
  );
  assert.deepEqual(removed.slice(0, 1), ['IPVS: 1 virtual service(s)']);
});

test('kube-proxy IPVS leftovers: a virtual service gone during the drain fails nothing and is not reported removed', async () => {
  const { runner } = node([tcp('ESTABLISHED') + UDP]);
  // The kernel as the drain leaves it: 10.20.30.41 deleted meanwhile by another owner (kproxy's
  // IPVS mode's full sync, kube-proxy's own), so its deletion is refused as gone.
  const present = new Set(['10.20.30.42']);
  const removed = await removeKubeProxyLeftovers(runner, {
    openIpvs: async () => ({
      listServices: async () => SERVICES,
      deleteService: async (s) => present.delete(s.address),
      close: () => {},
    }),
    conntrack: { deleteEntries: async (cut) => cut.length },
    drain: { timeoutMs: 1_000, report: () => {}, ...clock() },
  });
  assert.deepEqual(removed.slice(0, 1), ['IPVS: 1 virtual service(s)']);
  assert.deepEqual([...present], []);
});

test('a cut connection’s conntrack entry: client to virtual service, replies from the real server, by IP protocol number', () => {
  const sctp = {
    protocol: 'SCTP',
    client: { address: 'fd00:100::200', port: 40000 },
    virtual: { address: 'fd00:96::41', port: 3868 },
    server: { address: 'fd00:244:1::10', port: 3869 },
    state: 'ESTABLISHED',
  };
  assert.deepEqual(conntrackEntryOf(sctp), {
    protocol: 132,
    source: sctp.client,
    destination: sctp.virtual,
    replySource: sctp.server,
  });
  assert.throws(() => conntrackEntryOf({ ...sctp, protocol: 'AH' }), /protocol AH/);
});

test('connections to cut and no conntrack deleter: refused before anything is removed', async () => {
  const { runner, calls } = node([UDP]);
  const deleted: string[] = [];
  await assert.rejects(
    removeKubeProxyLeftovers(runner, {
      openIpvs: async () => recordingIpvs(deleted),
      drain: { timeoutMs: 0, report: () => {}, ...clock() },
    }),
    /1 IPVS connection\(s\) to cut, and no conntrack deleter given/,
  );
  // The services and kube-ipvs0 stay: the connections IPVS balances go on through them.
  assert.deepEqual(deleted, []);
  assert.ok(!calls.some((call) => call.startsWith('ip link delete')), calls.join('\n'));
});

/** enum ip_conntrack_status: IPS_CONFIRMED, IPS_SRC_NAT, IPS_DST_NAT; enum tcp_conntrack. */
const CONFIRMED = 1 << 3;
const SRC_NAT = 1 << 4;
const DST_NAT = 1 << 5;
const TCP_STATES = { SYN_SENT: 1, SYN_RECV: 2, ESTABLISHED: 3, FIN_WAIT: 4, TIME_WAIT: 7, CLOSE: 8 };

const LIVE: IpvsConnection = {
  protocol: 'TCP',
  client: { address: '10.100.0.200', port: 40000 },
  virtual: { address: '10.20.30.41', port: 80 },
  server: { address: '10.244.1.10', port: 80 },
  state: 'ESTABLISHED',
};

/** A conntrack entry of `connection`'s original tuple as IPVS leaves it, with `changes`. */
function entryOf(
  { client, virtual, server }: IpvsConnection,
  changes: { replySource?: ConntrackTuple['source']; status?: number; tcpState?: number } = {},
): DecodedEntry {
  return {
    original: { protocol: 6, source: client, destination: virtual },
    reply: { protocol: 6, source: changes.replySource ?? server, destination: client },
    status: changes.status ?? CONFIRMED,
    id: 1,
    tcpState: changes.tcpState ?? TCP_STATES.ESTABLISHED,
  };
}

test('conntrack bears out a connection IPVS lists live only while its entry is IPVS’s, not DNATed, and TCP in a live state', () => {
  assert.equal(confirmedByConntrack(LIVE, entryOf(LIVE)), true);
  // Masqueraded on its way to the real server (kube-proxy's KUBE-POSTROUTING): still IPVS's.
  assert.equal(confirmedByConntrack(LIVE, entryOf(LIVE, { status: CONFIRMED | SRC_NAT })), true);
  for (const tcpState of [TCP_STATES.SYN_RECV, TCP_STATES.FIN_WAIT])
    assert.equal(confirmedByConntrack(LIVE, entryOf(LIVE, { tcpState })), true, `state ${tcpState}`);
  // No entry: its next packet meets the new rules anyway.
  assert.equal(confirmedByConntrack(LIVE, undefined), false);
  // The port reused to the same Service address, DNATed by kproxy (to the same real server).
  assert.equal(confirmedByConntrack(LIVE, entryOf(LIVE, { status: CONFIRMED | DST_NAT })), false);
  // Not IPVS's: its replies come from elsewhere.
  assert.equal(
    confirmedByConntrack(LIVE, entryOf(LIVE, { replySource: { address: '10.244.1.11', port: 80 } })),
    false,
  );
  assert.equal(
    confirmedByConntrack(LIVE, entryOf(LIVE, { replySource: { address: '10.244.1.10', port: 8080 } })),
    false,
  );
  // Over, or a handshake its real server never answered, whatever IPVS's state says.
  for (const tcpState of [TCP_STATES.SYN_SENT, TCP_STATES.TIME_WAIT, TCP_STATES.CLOSE])
    assert.equal(confirmedByConntrack(LIVE, entryOf(LIVE, { tcpState })), false, `state ${tcpState}`);
  // IPv6: the kernel's address and the list's compare as addresses.
  const v6: IpvsConnection = {
    ...LIVE,
    client: { address: 'fd00:100::200', port: 40000 },
    virtual: { address: 'fd00:96::41', port: 80 },
    server: { address: 'fd00:244:1::10', port: 80 },
  };
  assert.equal(
    confirmedByConntrack(v6, entryOf(v6, { replySource: { address: 'fd00:244:1:0:0:0:0:10', port: 80 } })),
    true,
  );
  // SCTP has no TCP state to go by.
  const sctp = { ...LIVE, protocol: 'SCTP' };
  const { tcpState: _, ...sctpEntry } = entryOf(sctp);
  assert.equal(confirmedByConntrack(sctp, sctpEntry), true);
});

test('the drain reads conntrack once per poll for the live connections, and waits only for those it bears out', async () => {
  // The second connection's port was reused through a DNAT to the same real server: IPVS keeps
  // listing it ESTABLISHED after the first one ended.
  const { runner } = node([
    tcp('ESTABLISHED') + tcp2('ESTABLISHED') + UDP,
    tcp('ESTABLISHED') + tcp2('ESTABLISHED') + UDP,
    tcp('TIME_WAIT') + tcp2('ESTABLISHED') + UDP,
  ]);
  const reads: string[][] = [];
  const conntrack = {
    async readEntries(tuples: readonly ConntrackTuple[]) {
      reads.push(tuples.map((t) => `${t.protocol} ${t.source.address}:${t.source.port}`));
      return tuples.map((tuple) => {
        const connection = { ...LIVE, client: tuple.source };
        return tuple.source.port === 40001
          ? entryOf(connection, { status: CONFIRMED | DST_NAT })
          : entryOf(connection);
      });
    },
  };
  const reported: string[] = [];
  const ended = await drainIpvsConnections(runner, SERVICES, {
    timeoutMs: 60_000,
    report: (l) => reported.push(l),
    conntrack,
    ...clock(),
  });
  assert.deepEqual(reads, [
    ['6 10.100.0.200:40000', '6 10.100.0.200:40001'],
    ['6 10.100.0.200:40000', '6 10.100.0.200:40001'],
    ['6 10.100.0.200:40001'],
  ]);
  assert.deepEqual(reported, [
    'IPVS drain: waiting up to 60.0 s for 1 connection(s) to end:\n  TCP 10.100.0.200:40000 -> 10.20.30.41:80 (10.244.1.10:80, ESTABLISHED)',
    'IPVS drain: no live connection left after 2.0 s',
  ]);
  // The one IPVS still lists is cut with the UDP flow (its DNATed entry is kept: the deleter's rule).
  assert.deepEqual(
    ended.map((c) => `${c.client.port} ${c.state}`),
    ['40001 ESTABLISHED', '54321 UDP'],
  );
});

test('kube-proxy IPVS leftovers: a virtual service kproxy’s IPVS mode took over during the drain stays, its connections uncut', async () => {
  const { runner } = node([tcp('ESTABLISHED') + UDP, tcp('TIME_WAIT') + UDP]);
  const deleted: string[] = [];
  const entries: ExactEntry[] = [];
  // kproxy's IPVS mode binds 10.20.30.42 (its first full sync, or the Service newly its own) while
  // the cleanup waits for the TCP connection to 10.20.30.41.
  const owned = [new Set<string>(), new Set(['10.20.30.42'])];
  const removed = await removeKubeProxyLeftovers(runner, {
    openIpvs: async () => recordingIpvs(deleted),
    conntrack: recordingConntrack(entries),
    drain: { timeoutMs: 60_000, report: () => {}, ...clock() },
    kproxyOwns: async () => {
      const addresses = owned.length > 1 ? owned.shift()! : owned[0]!;
      return (service) => addresses.has(service.address);
    },
  });
  assert.deepEqual(deleted, ['10.20.30.41']);
  // The UDP flow to the service kproxy took over goes on through IPVS: not cut.
  assert.deepEqual(entries, []);
  assert.deepEqual(removed, ['IPVS: 1 virtual service(s)', 'link kube-ipvs0']);
});
