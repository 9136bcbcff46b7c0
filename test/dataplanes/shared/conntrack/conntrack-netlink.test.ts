// The ctnetlink requests byte by byte against the kernel's layout (linux/netlink.h,
// linux/netfilter/nfnetlink.h, nfnetlink_conntrack.h), written out here by hand, and the decoder
// on replies the kernel sent (the deleter against a kernel: conntrack-netlink-kernel.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CT_DELETE,
  CT_GET,
  decodeEntry,
  writeEntryRequest,
} from '../../../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import { NetlinkDatagram } from '../../../../dataplanes/shared/netlink-socket.ts';

// linux/netlink.h
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLA_F_NESTED = 0x8000;
// linux/netfilter/nfnetlink.h: NFNL_SUBSYS_CTNETLINK; nfnetlink_conntrack.h: enum cntl_msg_types
const NFNL_SUBSYS_CTNETLINK = 1;
const IPCTNL_MSG_CT_GET = 1;
const IPCTNL_MSG_CT_DELETE = 2;
// enum ctattr_type, ctattr_tuple, ctattr_ip, ctattr_l4proto
const CTA_TUPLE_ORIG = 1;
const CTA_ID = 12;
const CTA_TUPLE_IP = 1;
const CTA_TUPLE_PROTO = 2;
const CTA_IP_V4_SRC = 1;
const CTA_IP_V4_DST = 2;
const CTA_IP_V6_SRC = 3;
const CTA_IP_V6_DST = 4;
const CTA_PROTO_NUM = 1;
const CTA_PROTO_SRC_PORT = 2;
const CTA_PROTO_DST_PORT = 3;

const le16 = (v: number) => Buffer.from([v & 0xff, v >> 8]);
const le32 = (v: number) => Buffer.from([v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >>> 24]);
const be16 = (v: number) => Buffer.from([v >> 8, v & 0xff]);
const be32 = (v: number) => Buffer.from([v >>> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff]);
/** struct nlattr: u16 nla_len (header included, padding not), u16 nla_type. */
const nla = (length: number, type: number) => Buffer.concat([le16(length), le16(type)]);
const pad = (n: number) => Buffer.alloc(n);
/** struct nlmsghdr: len, type, flags, seq, pid (0: to the kernel). */
const nlmsghdr = (length: number, type: number, flags: number, seq: number) =>
  Buffer.concat([le32(length), le16(type), le16(flags), le32(seq), le32(0)]);
/** struct nfgenmsg: u8 nfgen_family, u8 version (NFNETLINK_V0), __be16 res_id. */
const nfgenmsg = (family: number) => Buffer.concat([Buffer.from([family, 0]), be16(0)]);
const ports = (protocol: number, source: number, destination: number) => [
  nla(28, CTA_TUPLE_PROTO | NLA_F_NESTED),
  nla(5, CTA_PROTO_NUM),
  Buffer.from([protocol]),
  pad(3),
  nla(6, CTA_PROTO_SRC_PORT),
  be16(source),
  pad(2),
  nla(6, CTA_PROTO_DST_PORT),
  be16(destination),
  pad(2),
];

const V4_TCP = {
  protocol: 6,
  source: { address: '10.100.0.200', port: 40000 },
  destination: { address: '10.20.30.41', port: 80 },
};
const V6_UDP = {
  protocol: 17,
  source: { address: 'fd00:100::200', port: 54848 },
  destination: { address: 'fd00:96::53', port: 53 },
};

/** IPv4 TCP's request: 16 + 4 + CTA_TUPLE_ORIG of 52 bytes. */
const v4Get = (flags: number, seq: number) => [
  nlmsghdr(72, (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET, flags, seq),
  nfgenmsg(2), // AF_INET
  nla(52, CTA_TUPLE_ORIG | NLA_F_NESTED),
  nla(20, CTA_TUPLE_IP | NLA_F_NESTED),
  nla(8, CTA_IP_V4_SRC),
  Buffer.from([10, 100, 0, 200]),
  nla(8, CTA_IP_V4_DST),
  Buffer.from([10, 20, 30, 41]),
  ...ports(6, 40000, 80),
];

test('a GET of an IPv4 TCP tuple, as nlmsghdr, nfgenmsg and CTA_TUPLE_ORIG lay it out', () => {
  const datagram = new NetlinkDatagram();
  writeEntryRequest(datagram, CT_GET, V4_TCP);
  assert.equal(
    datagram.frame(7).toString('hex'),
    Buffer.concat(v4Get(NLM_F_REQUEST | NLM_F_ACK, 7)).toString('hex'),
  );
});

test('a DELETE of an IPv6 UDP tuple carries the entry id in network order after the tuple', () => {
  const datagram = new NetlinkDatagram();
  writeEntryRequest(datagram, CT_DELETE, V6_UDP, 0x507795c2);
  const expected = Buffer.concat([
    nlmsghdr(104, (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, 1),
    nfgenmsg(10), // AF_INET6
    nla(76, CTA_TUPLE_ORIG | NLA_F_NESTED),
    nla(44, CTA_TUPLE_IP | NLA_F_NESTED),
    nla(20, CTA_IP_V6_SRC),
    Buffer.from('fd000100000000000000000000000200', 'hex'),
    nla(20, CTA_IP_V6_DST),
    Buffer.from('fd000096000000000000000000000053', 'hex'),
    ...ports(17, 54848, 53),
    nla(8, CTA_ID),
    be32(0x507795c2),
  ]);
  assert.equal(datagram.frame(1).toString('hex'), expected.toString('hex'));
});

test('requests share a datagram, numbered in turn, only the last asking for an acknowledgement', () => {
  const datagram = new NetlinkDatagram();
  writeEntryRequest(datagram, CT_GET, V4_TCP);
  writeEntryRequest(datagram, CT_GET, V4_TCP);
  assert.equal(
    datagram.frame(41).toString('hex'),
    Buffer.concat([...v4Get(NLM_F_REQUEST, 41), ...v4Get(NLM_F_REQUEST | NLM_F_ACK, 42)]).toString('hex'),
  );
});

// Replies to a GET of each tuple, after nfgenmsg, from kernel 6.18 in a lab namespace holding
// entries made with `conntrack -I -p tcp -s 10.100.0.200 -d 10.20.30.41 --sport 40000 --dport 80
// -r 10.244.1.10 -q 10.100.0.200 --reply-port-src 80 --reply-port-dst 40000 --state ESTABLISHED
// -t 300` and `conntrack -I -p udp -s fd00:100::200 -d fd00:96::53 --sport 54848 --dport 53 -r
// fd00:244:1::10 -q fd00:100::200 --reply-port-src 5353 --reply-port-dst 54848 -t 300`: the GET
// written by writeEntryRequest, sent from a process inside the namespace, its one reply printed
// in hex. `conntrack -L -o id` listed their ids as 1866282062 and 1350014402.
const V4_REPLY =
  '3400018014000180080001000a6400c8080002000a141e291c0002800500010006000000060002009c40000006000300005000003400028014000180080001000af4010a080002000a6400c81c00028005000100060000000600020000500000060003009c4000000800030000000008080008000000000008000c006f3d344e08000b0000000002080007000000012a300004802c000180050001000300000005000200000000000500030000000000060004000a000000060005000a0000001c001880080001000000000008000200000000000800030000000000';
const V6_REPLY =
  '4c0001802c00018014000300fd00010000000000000000000000020014000400fd0000960000000000000000000000531c000280050001001100000006000200d640000006000300003500004c0002802c00018014000300fd00024400010000000000000000001014000400fd0001000000000000000000000002001c00028005000100110000000600020014e9000006000300d64000000800030000000008080008000000000008000c00507795c208000b0000000002080007000000012b1c001880080001000000000008000200000000000800030000000000';

test('a GET reply decodes to its original and reply tuples, its status, its id and a TCP entry’s state', () => {
  assert.deepEqual(decodeEntry(Buffer.from(V4_REPLY, 'hex')), {
    original: V4_TCP,
    reply: {
      protocol: 6,
      source: { address: '10.244.1.10', port: 80 },
      destination: { address: '10.100.0.200', port: 40000 },
    },
    status: 8, // IPS_CONFIRMED
    id: 1866282062,
    tcpState: 3, // ESTABLISHED, as made (CTA_PROTOINFO's CTA_PROTOINFO_TCP_STATE)
  });
  assert.deepEqual(decodeEntry(Buffer.from(V6_REPLY, 'hex')), {
    original: V6_UDP,
    reply: {
      protocol: 17,
      source: { address: 'fd00:244:1::10', port: 5353 },
      destination: { address: 'fd00:100::200', port: 54848 },
    },
    status: 8,
    id: 1350014402,
  });
});

test('a reply without its reply tuple or id is an error, not an entry', () => {
  // The IPv4 reply's CTA_TUPLE_ORIG alone (its first 52 bytes).
  assert.throws(() => decodeEntry(Buffer.from(V4_REPLY, 'hex').subarray(0, 52)), /without a reply tuple/);
});
