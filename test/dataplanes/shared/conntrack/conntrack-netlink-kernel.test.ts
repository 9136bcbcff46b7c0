// Kernel test (root, in a throwaway namespace): the netlink conntrack deleter against a real
// conntrack table. Entries are made with `conntrack -I` as IPVS with net.ipv4.vs.conntrack=1 leaves
// them (original client -> virtual service, reply real server -> client), beside decoys that must
// stay; the deleter runs in a child inside the namespace (harness/namespace-conntrack.ts: a socket of
// this process would reach the host's table), and `conntrack -L` there says what is left.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import type { ExactEntry } from '../../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { allowance } from '../../../../harness/emulation.ts';
import { conntrackDeleterIn, conntrackReaderIn } from '../../../../harness/namespace-conntrack.ts';
import { Lab, requireRoot } from '../../../../harness/netns.ts';

/**
 * A child's node start and its deletion (milliseconds: a few datagrams) take ~1 s of CPU; at the
 * design load ~5 s (harness/emulation.ts), twice that as margin.
 */
const CHILD_MS = allowance(10_000);
/** The namespace, ~330 `conntrack -I` in one shell (~5 ms of CPU each), and four children. */
const TEST_MS = allowance(120_000);

interface Made {
  readonly protocol: 'tcp' | 'udp';
  readonly client: readonly [string, number];
  readonly virtual: readonly [string, number];
  readonly server: readonly [string, number];
  /** Made by a DNAT rule (IPS_DST_NAT), not by IPVS. */
  readonly dnat?: boolean;
}

/**
 * `conntrack -I` of an entry as IPVS leaves it: orig client -> virtual, reply server -> client; or
 * as a DNAT to the server makes it (the kernel NATs the reply tuple to the server and sets
 * IPS_DST_NAT, which a reply tuple given as the server's would not).
 */
function insertArgs({ protocol, client, virtual, server, dnat }: Made): string {
  const [from, fromPort] = dnat ? virtual : server;
  return [
    'conntrack -I -p',
    protocol,
    `-s ${client[0]} -d ${virtual[0]} --sport ${client[1]} --dport ${virtual[1]}`,
    `-r ${from} -q ${client[0]} --reply-port-src ${fromPort} --reply-port-dst ${client[1]}`,
    protocol === 'tcp' ? '--state ESTABLISHED' : '',
    '-t 600',
    dnat ? `--dst-nat ${server[0]}:${server[1]}` : '',
  ].join(' ');
}

/** The connection IPVS lists for an entry, as the deleter is given it. */
function cutOf({ protocol, client, virtual, server }: Made): ExactEntry {
  return {
    protocol: protocol === 'tcp' ? 6 : 17,
    source: { address: client[0], port: client[1] },
    destination: { address: virtual[0], port: virtual[1] },
    replySource: { address: server[0], port: server[1] },
  };
}

/** "tcp 10.100.0.200:40000 -> 10.20.30.41:80 from 10.244.1.10:80", as `conntrack -L` lists it. */
function key({ protocol, client, virtual, server }: Made): string {
  return `${protocol} ${client.join(':')} -> ${virtual.join(':')} from ${server.join(':')}`;
}

async function listed(lab: Lab, ns: string): Promise<string[]> {
  const keys: string[] = [];
  for (const family of ['ipv4', 'ipv6']) {
    for (const line of (await lab.exec(ns, 'conntrack', ['-L', '-f', family])).stdout.split('\n')) {
      const match =
        /^(tcp|udp)\s.*?src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+) .*?src=(\S+) dst=\S+ sport=(\d+)/.exec(
          line,
        );
      if (match === null) continue;
      const [, protocol, src, dst, sport, dport, rsrc, rsport] = match;
      keys.push(`${protocol} ${src}:${sport} -> ${dst}:${dport} from ${rsrc}:${rsport}`);
    }
  }
  return keys.sort();
}

const tcp = (client: [string, number], virtual: [string, number], server: [string, number]): Made => ({
  protocol: 'tcp',
  client,
  virtual,
  server,
});
const udp = (client: [string, number], virtual: [string, number], server: [string, number]): Made => ({
  protocol: 'udp',
  client,
  virtual,
  server,
});

const C4 = '10.100.0.200';
const C6 = 'fd00:100::200';
/** The connections IPVS balanced when its services went, each with its entry. */
const CUT = [
  tcp([C4, 40000], ['10.20.30.41', 80], ['10.244.1.10', 80]),
  udp([C4, 54321], ['10.20.30.42', 53], ['10.244.1.11', 5353]),
  tcp([C6, 40000], ['fd00:96::41', 80], ['fd00:244:1::10', 80]),
  udp([C6, 54321], ['fd00:96::53', 53], ['fd00:244:1::11', 5353]),
];
/** Entries that must stay. */
const KEPT = [
  // The same client and virtual service, another source port: another connection.
  tcp([C4, 40001], ['10.20.30.41', 80], ['10.244.1.10', 80]),
  udp([C6, 54322], ['fd00:96::53', 53], ['fd00:244:1::11', 5353]),
  // The original tuple of a cut connection, made since by kproxy's DNAT (to another endpoint, or
  // another port of the same one): its reply source is not the cut real server.
  tcp([C4, 40002], ['10.20.30.41', 80], ['10.244.1.12', 80]),
  tcp([C4, 40003], ['10.20.30.41', 80], ['10.244.1.10', 8080]),
  udp([C6, 54323], ['fd00:96::53', 53], ['fd00:244:1::12', 5353]),
  // The original tuple of a cut connection, DNATed since to the cut real server itself: IPVS matches
  // its replies to the cut connection (same client port and real server) and lists that as live.
  { ...tcp([C4, 40004], ['10.20.30.41', 80], ['10.244.1.10', 80]), dnat: true },
  // Unrelated flows.
  tcp(['10.0.0.1', 1234], ['10.0.0.2', 5678], ['10.0.0.2', 5678]),
  udp(['fd00::1', 1234], ['fd00::2', 53], ['fd00::2', 53]),
];
/** What the drain listed as cut for the kept ones above: the cut real server. */
const CUT_BY_TUPLE = [
  tcp([C4, 40002], ['10.20.30.41', 80], ['10.244.1.10', 80]),
  tcp([C4, 40003], ['10.20.30.41', 80], ['10.244.1.10', 80]),
  udp([C6, 54323], ['fd00:96::53', 53], ['fd00:244:1::11', 5353]),
  tcp([C4, 40004], ['10.20.30.41', 80], ['10.244.1.10', 80]),
];
/** Cut connections whose entries are gone already (the flow ended). */
const ENDED = [
  tcp([C4, 40009], ['10.20.30.41', 80], ['10.244.1.10', 80]),
  udp([C6, 54329], ['fd00:96::53', 53], ['fd00:244:1::11', 5353]),
];

describe('the netlink conntrack deleter on a real kernel', () => {
  test('deletes exactly the cut entries whose reply comes from the cut real server, and counts them', {
    timeout: TEST_MS,
  }, async (t) => {
    if (!requireRoot(t, 'network namespaces and conntrack')) return;
    const lab = new Lab(`ctnl${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    await lab.exec(ns, 'sh', ['-e', '-c', [...CUT, ...KEPT].map(insertArgs).join('\n')]);
    assert.deepEqual(await listed(lab, ns), [...CUT, ...KEPT].map(key).sort());
    const deleter = conntrackDeleterIn(
      execaRunner(['ip', 'netns', 'exec', ns], { timeoutMs: () => CHILD_MS }),
    );

    const cut = [...ENDED, ...CUT, ...CUT_BY_TUPLE].map(cutOf);
    assert.equal(await deleter.deleteEntries(cut), CUT.length);
    assert.deepEqual(await listed(lab, ns), KEPT.map(key).sort());
    // Again: every cut entry is gone, which is no error, and nothing else goes.
    assert.equal(await deleter.deleteEntries(cut), 0);
    assert.deepEqual(await listed(lab, ns), KEPT.map(key).sort());
  });

  test('entries over several datagrams; a socket without CAP_NET_ADMIN gets a clear refusal', {
    timeout: TEST_MS,
  }, async (t) => {
    if (!requireRoot(t, 'network namespaces and conntrack')) return;
    const lab = new Lab(`ctnlmany${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // 1 + 128 + 128 + 43 requests (ENTRIES_PER_DATAGRAM); every third entry was DNATed since.
    const made = Array.from({ length: 300 }, (_, i) =>
      udp(
        [`10.100.${i >> 8}.${i & 0xff}`, 30000 + i],
        ['10.20.30.42', 53],
        [`10.244.1.${i % 3 === 0 ? 99 : 10}`, 53],
      ),
    );
    await lab.exec(ns, 'sh', ['-e', '-c', made.map(insertArgs).join('\n')]);
    const cut = made.map((m) => cutOf({ ...m, server: ['10.244.1.10', 53] }));

    const unprivileged = conntrackDeleterIn(
      execaRunner(['ip', 'netns', 'exec', ns, 'setpriv', '--bounding-set', '-net_admin', '--'], {
        timeoutMs: () => CHILD_MS,
      }),
    );
    await assert.rejects(
      unprivileged.deleteEntries(cut),
      /conntrack get of udp 10\.100\.0\.0:30000 -> 10\.20\.30\.42:53 \(replies from 10\.244\.1\.10:53\) refused: EPERM/,
    );
    assert.equal((await listed(lab, ns)).length, made.length);

    const deleter = conntrackDeleterIn(
      execaRunner(['ip', 'netns', 'exec', ns], { timeoutMs: () => CHILD_MS }),
    );
    assert.equal(await deleter.deleteEntries(cut), 200);
    assert.deepEqual(
      await listed(lab, ns),
      made
        .filter((_, i) => i % 3 === 0)
        .map(key)
        .sort(),
    );
  });

  test('reads entries by original tuple, in order: reply source, DNAT status, TCP state; none where there is none', {
    timeout: TEST_MS,
  }, async (t) => {
    if (!requireRoot(t, 'network namespaces and conntrack')) return;
    const lab = new Lab(`ctnlread${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    const dnated = { ...tcp([C4, 40004], ['10.20.30.41', 80], ['10.244.1.10', 80]), dnat: true };
    const handshake = tcp([C4, 40005], ['10.20.30.41', 80], ['10.244.1.10', 80]);
    await lab.exec(ns, 'sh', [
      '-e',
      '-c',
      [...CUT, dnated].map(insertArgs).join('\n') +
        `\n${insertArgs(handshake).replace('--state ESTABLISHED', '--state SYN_SENT')}`,
    ]);
    const reader = conntrackReaderIn(execaRunner(['ip', 'netns', 'exec', ns], { timeoutMs: () => CHILD_MS }));
    const asked = [ENDED[0]!, CUT[0]!, dnated, handshake, CUT[3]!].map(cutOf);
    const read = await reader.readEntries(asked);
    assert.deepEqual(
      read.map((entry) =>
        entry === undefined
          ? 'none'
          : `${entry.original.source.port} from ${entry.reply.source.address}:${entry.reply.source.port} dnat=${(entry.status & (1 << 5)) !== 0} tcp=${entry.tcpState}`,
      ),
      [
        'none',
        '40000 from 10.244.1.10:80 dnat=false tcp=3',
        '40004 from 10.244.1.10:80 dnat=true tcp=3',
        '40005 from 10.244.1.10:80 dnat=false tcp=1',
        '54321 from fd00:244:1::11:5353 dnat=false tcp=undefined',
      ],
    );
  });
});
