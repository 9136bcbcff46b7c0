// The netlink conntrack deleter (dataplanes/shared/conntrack/conntrack-netlink.ts) in a process of
// its own, for tests and benches that act in a lab namespace: a ctnetlink socket lives in the
// namespace of the process that opens it, and one opened by the test process would reach the
// host's table. Started inside the namespace (namespace-conntrack.ts): the entries to delete as
// JSON on stdin, `{"deleted":N}` on stdout; or `{"read":[tuples]}`, `{"entries":[entry or null]}`;
// a refusal on stderr, exit 1.
import { text } from 'node:stream/consumers';
import {
  type ConntrackTuple,
  type ExactEntry,
  netlinkConntrackDeleter,
} from '../dataplanes/shared/conntrack/conntrack-netlink.ts';

try {
  const asked = JSON.parse(await text(process.stdin)) as ExactEntry[] | { read: ConntrackTuple[] };
  const answer = Array.isArray(asked)
    ? { deleted: await netlinkConntrackDeleter.deleteEntries(asked) }
    : { entries: (await netlinkConntrackDeleter.readEntries(asked.read)).map((entry) => entry ?? null) };
  process.stdout.write(`${JSON.stringify(answer)}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
