import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  connectionsTo,
  describeConnection,
  isLive,
  parseIpvsConnections,
} from '../../../dataplanes/shared/ipvs-connection-list.ts';
import { conntrackEntryOf } from '../../../dataplanes/shared/ipvs-drain.ts';

/** As the kernel prints it (ip_vs_conn_seq_show): a header, IPv4 in hex, IPv6 as %pI6, a template. */
const LISTED = `Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP 0A6400C8 9C40 0A141E29 0050 0AF4010A 0050 ESTABLISHED     899
TCP 0A6400C8 9C41 0A141E29 0050 0AF4010B 0050 TIME_WAIT       119
UDP 0A6400C8 D431 0A141E2A 0035 0AF4010B 0035 UDP             299
TCP 0A6400C8 0000 0A141E29 0050 0AF4010A 0050 NONE            179
TCP 0A6400C8 9C42 0A64000B 0BB9 0AF4010B 0050 FIN_WAIT         98
TCP fd00:0100:0000:0000:0000:0000:0000:0200 9C43 fd00:0020:0000:0000:0000:0000:0000:0041 0050 fd00:0244:0001:0000:0000:0000:0000:0010 0050 SYN_RECV         55
SCTP 0A6400C8 9C44 0A141E2B 0050 0AF4010A 0050 CLOSED            9
garbage
`;

test('the connection list: IPv4 hex and IPv6 %pI6 read as canonical addresses, ports from hex', () => {
  const listed = parseIpvsConnections(LISTED);
  assert.equal(listed.length, 7);
  assert.deepEqual(listed[0], {
    protocol: 'TCP',
    client: { address: '10.100.0.200', port: 40000 },
    virtual: { address: '10.20.30.41', port: 80 },
    server: { address: '10.244.1.10', port: 80 },
    state: 'ESTABLISHED',
  });
  assert.deepEqual(listed[5]!.client, { address: 'fd00:100::200', port: 40003 });
  assert.deepEqual(listed[5]!.server, { address: 'fd00:244:1::10', port: 80 });
  assert.equal(parseIpvsConnections('').length, 0);
});

test('live: TCP and SCTP until TIME_WAIT/CLOSE(D), not SYN_SENT; UDP is never waited for; templates are not connections', () => {
  const states = parseIpvsConnections(LISTED).map((c) => [`${c.protocol} ${c.state}`, isLive(c)]);
  assert.deepEqual(states, [
    ['TCP ESTABLISHED', true],
    ['TCP TIME_WAIT', false],
    ['UDP UDP', false],
    ['TCP NONE', false],
    ['TCP FIN_WAIT', true],
    ['TCP SYN_RECV', true],
    ['SCTP CLOSED', false],
  ]);
  // IPVS's SYN_SENT: not a client's handshake into a virtual service; not waited for.
  assert.equal(isLive({ ...parseIpvsConnections(LISTED)[0]!, state: 'SYN_SENT' }), false);
});

test('the connections cut are those to the listed services, UDP included, ended ones and templates not', () => {
  const listed = parseIpvsConnections(LISTED);
  const services = [
    { protocol: 'TCP', address: '10.20.30.41', port: 80 },
    { protocol: 'UDP', address: '10.20.30.42', port: 53 },
    // Spelled as netlink may give it: compared canonically.
    { protocol: 'TCP', address: 'fd00:20::0:41', port: 80 },
  ];
  assert.deepEqual(connectionsTo(listed, services).map(describeConnection), [
    'TCP 10.100.0.200:40000 -> 10.20.30.41:80 (10.244.1.10:80, ESTABLISHED)',
    'UDP 10.100.0.200:54321 -> 10.20.30.42:53 (10.244.1.11:53, UDP)',
    'TCP [fd00:100::200]:40003 -> [fd00:20::41]:80 ([fd00:244:1::10]:80, SYN_RECV)',
  ]);
  // The NodePort's connection is another service's: not one of these.
  assert.equal(connectionsTo(listed, [{ protocol: 'UDP', address: '10.20.30.41', port: 80 }]).length, 0);
});

test('the conntrack entry of a connection: its whole original tuple and its real server, never the address alone', () => {
  const [tcp, , , , , v6] = parseIpvsConnections(LISTED);
  assert.deepEqual(conntrackEntryOf(tcp!), {
    protocol: 6,
    source: { address: '10.100.0.200', port: 40000 },
    destination: { address: '10.20.30.41', port: 80 },
    replySource: { address: '10.244.1.10', port: 80 },
  });
  assert.deepEqual(conntrackEntryOf(v6!), {
    protocol: 6,
    source: { address: 'fd00:100::200', port: 40003 },
    destination: { address: 'fd00:20::41', port: 80 },
    replySource: { address: 'fd00:244:1::10', port: 80 },
  });
});
