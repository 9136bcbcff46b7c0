// The IPVS netlink bodies, byte for byte as include/uapi/linux/ip_vs.h lays them out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import ipaddr from 'ipaddr.js';
import {
  decodeDest,
  decodeService,
  destIdentityMessage,
  destMessage,
  serviceIdentityMessage,
  serviceMessage,
  timeoutsMessage,
  writeDestMessage,
  writeServiceMessage,
} from '../../../dataplanes/ipvs/ipvs-messages.ts';
import type { VirtualService } from '../../../dataplanes/ipvs/virtual-servers.ts';
import {
  AttributeWriter,
  attribute,
  nested,
  parseAttributes,
  u32,
} from '../../../dataplanes/shared/netlink-attributes.ts';

const web: VirtualService = {
  family: 'IPv4',
  protocol: 'TCP',
  address: '10.96.0.10',
  port: 80,
  scheduler: 'rr',
  schedulerFlags: [],
  persistenceTimeout: 0,
};

function hex(...parts: string[]): string {
  return parts.join('').replaceAll(' ', '');
}

const WEB_IDENTITY = [
  '0600 0100 0200 0000', // AF = AF_INET
  '0600 0200 0600 0000', // PROTOCOL = IPPROTO_TCP
  '1400 0300 0a60000a 00000000 00000000 00000000', // ADDR (union nf_inet_addr)
  '0600 0400 0050 0000', // PORT = 80, network order
];

test('NEW_SERVICE body: nested service with identity, scheduler, flags, timeout and netmask', () => {
  assert.equal(
    serviceMessage(web).toString('hex'),
    hex(
      '5400 0100', // IPVS_CMD_ATTR_SERVICE, 84 bytes
      ...WEB_IDENTITY,
      '0700 0600 727200 00', // SCHED_NAME "rr\0", padded
      '0c00 0700 00000000 ffffffff', // FLAGS {flags 0, mask ~0}
      '0800 0800 00000000', // TIMEOUT 0
      '0800 0900 ffffffff', // NETMASK /32
    ),
  );
});

test('a persistent IPv6 service sets the persistent flag, its timeout and a /128 netmask', () => {
  const body = serviceMessage({
    ...web,
    family: 'IPv6',
    address: 'fd00::1',
    protocol: 'UDP',
    persistenceTimeout: 600,
  });
  assert.equal(
    body.toString('hex'),
    hex(
      '5400 0100',
      '0600 0100 0a00 0000', // AF_INET6
      '0600 0200 1100 0000', // IPPROTO_UDP
      '1400 0300 fd000000 00000000 00000000 00000001',
      '0600 0400 0050 0000',
      '0700 0600 727200 00',
      '0c00 0700 01000000 ffffffff', // IP_VS_SVC_F_PERSISTENT
      '0800 0800 58020000', // 600 s
      '0800 0900 80000000', // 128
    ),
  );
});

test('DEL_SERVICE body: the identity only', () => {
  assert.equal(serviceIdentityMessage(web).toString('hex'), hex('3000 0100', ...WEB_IDENTITY));
});

test('NEW_DEST body: the service identity, then the masquerading destination with its weight', () => {
  assert.equal(
    destMessage(web, { address: '10.244.1.10', port: 8080, weight: 1 }).toString('hex'),
    hex(
      '3000 0100',
      ...WEB_IDENTITY,
      '4800 0200', // IPVS_CMD_ATTR_DEST, 72 bytes
      '1400 0100 0af4010a 00000000 00000000 00000000', // ADDR
      '0600 0200 1f90 0000', // PORT 8080
      '0600 0b00 0200 0000', // ADDR_FAMILY AF_INET
      '0800 0300 00000000', // FWD_METHOD masquerade
      '0800 0400 01000000', // WEIGHT 1
      '0800 0500 00000000', // U_THRESH
      '0800 0600 00000000', // L_THRESH
    ),
  );
});

test('DEL_DEST body: service and destination identities', () => {
  assert.equal(
    destIdentityMessage(web, { address: '10.244.1.10', port: 8080 }).toString('hex'),
    hex(
      '3000 0100',
      ...WEB_IDENTITY,
      '2000 0200',
      '1400 0100 0af4010a 00000000 00000000 00000000',
      '0600 0200 1f90 0000',
    ),
  );
});

test('a dumped service decodes back, including persistence; kernel-only attributes are ignored', () => {
  const sent = serviceMessage({ ...web, persistenceTimeout: 10800 });
  const inner = parseAttributes(sent).get(1)!;
  // The kernel adds stats and the HASHED flag to what it reports.
  const flags = Buffer.from('0300000000000000', 'hex');
  const reply = nested(1, [inner, attribute(7, flags), nested(10, [u32(1, 5)])]);
  assert.deepEqual(decodeService(reply), { ...web, persistenceTimeout: 10800 });
});

test('firewall-mark services are not ours and decode to undefined', () => {
  const reply = nested(1, [
    ...[...parseAttributes(serviceIdentityMessage(web).subarray(4))].map(([t, v]) => attribute(t, v)),
    u32(5, 42),
  ]);
  assert.equal(decodeService(reply), undefined);
});

test('a dumped destination decodes with its connection counters', () => {
  const sent = parseAttributes(destMessage(web, { address: '10.244.1.10', port: 8080, weight: 0 })).get(2)!;
  const reply = nested(2, [
    ...[...parseAttributes(sent)].map(([t, v]) => attribute(t, v)),
    u32(7, 3),
    u32(8, 2),
  ]);
  assert.deepEqual(decodeDest('IPv4', reply), {
    address: '10.244.1.10',
    port: 8080,
    weight: 0,
    activeConnections: 3,
    inactiveConnections: 2,
  });
});

test('a truncated attribute is an error, not a silent misread', () => {
  assert.throws(() => parseAttributes(Buffer.from('0800010001', 'hex')), /malformed netlink attribute/);
});

test('SET_CONFIG body: only the timeouts that are set, in seconds', () => {
  assert.equal(
    timeoutsMessage({ tcpSeconds: 900, tcpFinSeconds: 0, udpSeconds: 300 }).toString('hex'),
    hex('0800 0400 84030000', '0800 0600 2c010000'),
  );
});

test('mh-fallback and mh-port are the SCHED1 and SCHED2 service flags, and decode back for mh only', () => {
  const mh: VirtualService = { ...web, scheduler: 'mh', schedulerFlags: ['mh-fallback', 'mh-port'] };
  const attrs = parseAttributes(parseAttributes(serviceMessage(mh)).get(1)!);
  // IP_VS_SVC_F_SCHED1 (0x08) | IP_VS_SVC_F_SCHED2 (0x10), mask all ones.
  assert.equal(attrs.get(7)!.toString('hex'), '18000000ffffffff');
  const reply = (service: VirtualService, bits: string) =>
    nested(1, [parseAttributes(serviceMessage(service)).get(1)!, attribute(7, Buffer.from(bits, 'hex'))]);
  // The kernel reports HASHED (0x02) besides.
  assert.deepEqual(decodeService(reply(mh, '1a00000000000000')), mh);
  assert.deepEqual(decodeService(reply(mh, '1200000000000000'))?.schedulerFlags, ['mh-port']);
  // To sh the same bits are sh-fallback and sh-port, which kproxy never sets: not read as mh's.
  assert.deepEqual(decodeService(reply({ ...web, scheduler: 'sh' }, '1a00000000000000'))?.schedulerFlags, []);
});

test('bodies written one after another into one writer, past its first buffer, are each the body alone', () => {
  // A datagram of commands is one writer; ~150 bytes a command outgrow its first 4 KiB many times.
  const w = new AttributeWriter();
  const expected: Buffer[] = [];
  for (let i = 0; i < 200; i++) {
    const service = { ...web, port: 1000 + i, scheduler: i % 2 ? 'rr' : 'mh', persistenceTimeout: i };
    const server = { address: `10.244.${i % 250}.${(i % 200) + 1}`, port: 8000 + i, weight: i + 1 };
    writeServiceMessage(w, service);
    writeDestMessage(w, service, server);
    expected.push(serviceMessage(service), destMessage(service, server));
  }
  assert.ok(w.length > 4 * 4096);
  assert.equal(w.bytesWritten().toString('hex'), Buffer.concat(expected).toString('hex'));
});

test('addresses are written as ipaddr.js reads them, and text that is no address is refused', () => {
  // The dotted quads are written without ipaddr.js (a cold sync's hot path); anything else falls back to it.
  const destAddress = (address: string) =>
    parseAttributes(parseAttributes(destIdentityMessage(web, { address, port: 80 })).get(2)!).get(1)!;
  for (const address of [
    '0.0.0.0',
    '255.255.255.255',
    '10.244.1.10',
    '1.22.233.4',
    'fd00::1',
    '::ffff:1.2.3.4',
  ]) {
    const expected = Buffer.alloc(16);
    Buffer.from(ipaddr.parse(address).toByteArray()).copy(expected);
    assert.equal(destAddress(address).toString('hex'), expected.toString('hex'), address);
  }
  for (const text of ['10.0.0.256', '10.0.0.1.', '.10.0.0', '10..0.1', '10.0.0.1000', '10.0.0.x', ''])
    assert.throws(() => destAddress(text), Error, text);
});
