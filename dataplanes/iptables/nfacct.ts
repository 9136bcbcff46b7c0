// nfacct objects (nfnetlink_acct): named packet and byte counters that `-m nfacct` rules add to,
// over netlink (NETLINK_NETFILTER) in this process' network namespace, where they live. kube-proxy
// keeps them the same way (pkg/proxy/util/nfacct) rather than through the nfacct tool.
// The package's netlink layer, not its index, which loads every family it ships (netlink-socket.ts).
import { createNetlink } from 'netlink/dist/netlink.js';
import { parseAttributes, string } from '../shared/netlink-attributes.ts';

export interface NfacctCounters {
  /** Creates the counter unless it exists; an existing one keeps its count. */
  ensure(name: string): Promise<void>;
  /** The packets the counter has seen. */
  packets(name: string): Promise<number>;
}

const NETLINK_NETFILTER = 12;
const NFNL_SUBSYS_ACCT = 7;
const NFNL_MSG_ACCT_NEW = 0;
const NFNL_MSG_ACCT_GET = 1;
const NFACCT_NAME = 1;
const NFACCT_PKTS = 2;
/** NLM_F_ROOT | NLM_F_MATCH. */
const NLM_F_DUMP = 0x300;
const NLM_F_EXCL = 0x200;
const NLM_F_CREATE = 0x400;
/** struct nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0. */
const NFGENMSG = Buffer.alloc(4);

/**
 * How long the kernel may take to answer. It answers an nfacct request synchronously, in
 * microseconds; no answer means it is stuck, and a scrape or the start must not wait for good.
 */
const REQUEST_TIMEOUT_MS = 5_000;

/** One request on a socket of its own: a start and a scrape now and then need no more. */
async function request(type: number, body: Buffer, flags: number): Promise<Buffer[]> {
  const socket = createNetlink(NETLINK_NETFILTER);
  try {
    const [replies] = await socket.request((NFNL_SUBSYS_ACCT << 8) | type, [NFGENMSG, body], {
      flags,
      timeout: REQUEST_TIMEOUT_MS,
    });
    return replies.map((reply) => reply.data);
  } finally {
    socket.close();
  }
}

export const netlinkNfacct: NfacctCounters = {
  async ensure(name) {
    try {
      await request(NFNL_MSG_ACCT_NEW, string(NFACCT_NAME, name), NLM_F_CREATE | NLM_F_EXCL);
    } catch (error) {
      // The netlink package's spelling of a kernel refusal: it exists, as wanted.
      if (!(error instanceof Error && error.message.endsWith('EEXIST'))) throw error;
    }
  },
  async packets(name) {
    // A dump of every counter (a handful): the kernel answers a GET of one by name as a part of a
    // multipart message that it never ends, which the netlink package cannot take.
    for (const reply of await request(NFNL_MSG_ACCT_GET, Buffer.alloc(0), NLM_F_DUMP)) {
      const attributes = parseAttributes(reply.subarray(NFGENMSG.length));
      if (attributes.get(NFACCT_NAME)?.toString('utf8') !== `${name}\0`) continue;
      const packets = attributes.get(NFACCT_PKTS);
      // A 64-bit count in network byte order; a Number is exact up to 2^53 packets.
      if (packets !== undefined) return Number(packets.readBigUInt64BE());
    }
    throw new Error(`nfacct: no counter ${name}`);
  },
};
