// The element writer's bytes against what nft 1.0.6 sends for the same `add element` text
// (recorded with `nft --debug=mnl -f`; nft also sends NFTA_SET_ELEM_LIST_SET_ID, its own number
// for the set, which the kernel needs only for a set created in the same batch: left out here).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type ElementCursor,
  type ElementOp,
  elementBatch,
  elementPiece,
} from '../../../../dataplanes/shared/nft/element-batch.ts';
import { setLayout } from '../../../../dataplanes/shared/nft/element-encoding.ts';
import type { ElementSpec, NftFamily, SetSpec } from '../../../../dataplanes/shared/nft/transaction.ts';

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ''), 'hex');
/** NFTA_SET_ELEM_LIST_TABLE "kproxy". */
const TABLE_ATTR = '0b000100 6b70726f 78790000';

/** The attributes of the batch's one element message (between its headers and the batch end). */
function elementMessage(
  set: SetSpec,
  element: ElementSpec,
  verb: 'add' | 'delete' = 'add',
  family: NftFamily = 'ip',
): Buffer {
  const layout = setLayout(set);
  assert.ok(layout, `layout of ${set.type}`);
  const { datagram } = elementBatch('kproxy', [{ verb, family, set: set.name, layout, elements: [element] }]);
  const bytes = datagram.frame(100);
  const begin = bytes.readUInt32LE(0);
  const length = bytes.readUInt32LE(begin);
  // nlmsghdr: type NFT_MSG_NEWSETELEM/DELSETELEM, flags request (+ create for add, + ack: the
  // last message the kernel answers), seq; nfgenmsg: the family.
  assert.equal(bytes.readUInt16LE(begin + 4), verb === 'add' ? 0x0a0c : 0x0a0e);
  assert.equal(bytes.readUInt16LE(begin + 6), verb === 'add' ? 0x405 : 0x5);
  assert.equal(bytes.readUInt32LE(begin + 8), 101);
  assert.equal(bytes[begin + 16], family === 'ip' ? 2 : 10);
  // The batch begin (res_id NFNL_SUBSYS_NFTABLES, network order) and end.
  assert.deepEqual(bytes.subarray(0, 20), hex('14000000 10000100 64000000 00000000 0000000a'));
  assert.deepEqual(bytes.subarray(begin + length), hex('14000000 11000100 66000000 00000000 0000000a'));
  return bytes.subarray(begin + 20, begin + length);
}

test('a map of a concatenated key to one port: components padded to 4 bytes, the lone port 2', () => {
  const set: SetSpec = {
    name: 'aff-ports',
    kind: 'map',
    type: 'type ipv4_addr . inet_proto . inet_service : inet_service',
  };
  assert.deepEqual(
    elementMessage(set, { key: '10.0.0.2 . tcp . 80', value: '8080' }),
    hex(`${TABLE_ATTR} 0e000200 6166662d 706f7274 73000000
      28000380 24000180 14000180 10000100 0a000002 06000000 00500000 0c000280 06000100 1f900000`),
  );
});

test('a verdict map element with a comment: goto code in network order, chain, comment userdata', () => {
  const set: SetSpec = {
    name: 'service-ips',
    kind: 'map',
    type: 'type ipv4_addr . inet_proto . inet_service : verdict',
  };
  assert.deepEqual(
    elementMessage(set, { key: '10.0.0.3 . tcp . 80', value: 'goto cluster-ip', comment: 'ab' }),
    hex(`${TABLE_ATTR} 10000200 73657276 6963652d 69707300
      48000380 44000180 14000180 10000100 0a000003 06000000 00500000
      20000280 1c000280 08000100 fffffffc 0f000200 636c7573 7465722d 69700000
      09000600 00036162 00000000`),
  );
});

test("a comment over nft's 128 bytes is refused, not cut or wrapped in its one-byte length", () => {
  const set: SetSpec = {
    name: 'firewall-ips',
    kind: 'set',
    type: 'type ipv4_addr . inet_proto . inet_service',
  };
  const key = '10.0.0.3 . tcp . 80';
  assert.ok(elementMessage(set, { key, comment: 'é'.repeat(64) }).length > 0);
  assert.throws(() => elementMessage(set, { key, comment: `${'é'.repeat(64)}x` }), /over 128 bytes/);
});

test('a concatenated interval set: the range as its first key and its last (NFTA_SET_ELEM_KEY_END)', () => {
  const set: SetSpec = {
    name: 'firewall-allow',
    kind: 'set',
    type: 'type ipv4_addr . inet_proto . inet_service . ipv4_addr',
    flags: ['interval'],
  };
  assert.deepEqual(
    elementMessage(set, { key: '10.0.0.2 . tcp . 80 . 192.168.0.0/16' }),
    hex(`${TABLE_ATTR} 13000200 66697265 77616c6c 2d616c6c 6f770000
      38000380 34000180 18000180 14000100 0a000002 06000000 00500000 c0a80000
      18000a80 14000100 0a000002 06000000 00500000 c0a8ffff`),
  );
});

test('an element whose text does not fit its set or map is refused, naming it', () => {
  const set: SetSpec = {
    name: 'aff-ports',
    kind: 'map',
    type: 'type ipv4_addr . inet_proto . inet_service : inet_service',
  };
  for (const [element, error] of [
    [{ key: '10.0.0.2 . tcp', value: '8080' }, /element key 10\.0\.0\.2 \. tcp does not fit its set/],
    [
      { key: '10.0.0.2 . tcp . 80 . 81', value: '8080' },
      /element key 10\.0\.0\.2 \. tcp \. 80 \. 81 does not fit/,
    ],
    [{ key: '10.0.0.2 . tcp . 80', value: '8080 . 1' }, /element value 8080 \. 1 does not fit its map/],
    [{ key: '10.0.0.256 . tcp . 80', value: '8080' }, /10\.0\.0\.256 .*not an integer to 255/],
    [{ key: '10.0.0 . tcp . 80', value: '8080' }, /not an IPv4 address: 10\.0\.0$/],
    [{ key: '10.0.0.2 . tcpx . 80', value: '8080' }, /tcpx .*not an integer to 255/],
    [{ key: '10.0.0.2 . tcp . 65536', value: '8080' }, /not an integer to 65535/],
  ] as const) {
    assert.throws(() => elementMessage(set, element), error, element.key);
  }
});

test('a delete names the key only', () => {
  const set: SetSpec = {
    name: 'aff-ports',
    kind: 'map',
    type: 'type ipv4_addr . inet_proto . inet_service : inet_service',
  };
  assert.deepEqual(
    elementMessage(set, { key: '10.0.0.2 . tcp . 80', value: '8080' }, 'delete'),
    hex(`${TABLE_ATTR} 0e000200 6166662d 706f7274 73000000
      1c000380 18000180 14000180 10000100 0a000002 06000000 00500000`),
  );
});

test('typeof keys: numgen index in host order; IPv6 addresses and dnat data of address . port', () => {
  const set: SetSpec = {
    name: 'backends-tcp',
    kind: 'map',
    type: 'typeof ip6 daddr . tcp dport . numgen random mod 1 : ip6 daddr . tcp dport',
  };
  const body = elementMessage(set, { key: 'fd00::10 . 80 . 2', value: 'fd00:1::3 . 8080' }, 'add', 'ip6');
  const elements = body.subarray(body.length - (4 + 4 + 4 + 4 + 24 + 4 + 4 + 20));
  // ELEMENTS { LIST_ELEM { KEY { VALUE: addr(16) port(2+2) index(4 LE) } DATA { VALUE: addr(16) port(2+2) } } }
  assert.deepEqual(
    elements,
    hex(`44000380 40000180 20000180 1c000100 fd000000 00000000 00000000 00000010 00500000 02000000
      1c000280 18000100 fd000001 00000000 00000000 00000003 1f900000`),
  );
});

test('sets the packet path fills, or of unknown types, are left to nft', () => {
  assert.equal(
    setLayout({ name: 'a', kind: 'set', type: 'type ipv4_addr', flags: ['dynamic', 'timeout'] }),
    undefined,
  );
  assert.equal(setLayout({ name: 'b', kind: 'set', type: 'type ether_addr' }), undefined);
  assert.equal(setLayout({ name: 'c', kind: 'set', type: 'type ipv4_addr', flags: ['interval'] }), undefined);
});

test('elementPiece cuts operations into runs of at most so many elements, in order, a flush counting one', () => {
  const set: SetSpec = { name: 'bound-ips', kind: 'set', type: 'type ipv4_addr' };
  const layout = setLayout(set)!;
  const add = (from: number, to: number): ElementOp => ({
    verb: 'add',
    family: 'ip',
    set: set.name,
    layout,
    elements: Array.from({ length: to - from }, (_, i) => ({ key: `10.0.0.${from + i}` })),
  });
  const ops: ElementOp[] = [add(0, 5), { verb: 'flush', family: 'ip6', set: set.name }, add(5, 7)];
  const keys = (piece: readonly ElementOp[]) =>
    piece.map((op) => (op.verb === 'flush' ? 'flush' : op.elements.map((e) => e.key).join(' ')));
  const pieces: string[][] = [];
  let at: ElementCursor | undefined = { op: 0, element: 0 };
  while (at !== undefined) {
    const piece = elementPiece(ops, at, 3);
    assert.ok(piece.count <= 3);
    pieces.push(keys(piece.ops));
    at = piece.next;
  }
  assert.deepEqual(pieces, [
    ['10.0.0.0 10.0.0.1 10.0.0.2'],
    ['10.0.0.3 10.0.0.4', 'flush'],
    ['10.0.0.5 10.0.0.6'],
  ]);
  // A whole operation is passed on as it is; a count under one still takes one.
  assert.equal(elementPiece(ops, { op: 0, element: 0 }, 5).ops[0], ops[0]);
  assert.equal(elementPiece(ops, { op: 2, element: 1 }, 0).count, 1);
});
