// How long deleting the conntrack entries of cut IPVS connections takes (issue 29), against the
// size of the table: `kproxy cleanup --kube-proxy`'s old path, one `conntrack -D <exact filter>` per
// connection (conntrack-tools deletes through a filtered dump of the whole table, even for an exact
// tuple), against the netlink deleter (dataplanes/shared/conntrack/conntrack-netlink.ts, in a child
// inside the namespace: harness/namespace-conntrack.ts). In a lab namespace, the table is filled
// with UDP flows of its own loopback traffic (unanswered, their timeout raised), and the cut
// connections are UDP flows DNATed from a virtual address to a server, as IPVS's entries look.
//   node bench/conntrack-cut.ts [--table 100000] [--cut 1000,10000] [--sample 20]
// The old path runs on the first --sample connections of each cut only (each call reads the whole
// table: minutes for thousands), the figure per connection times the cut; the deleter on the rest.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import { deleteConntrackEntries } from '../dataplanes/shared/conntrack/conntrack-tool.ts';
import type { IpvsConnection } from '../dataplanes/shared/ipvs-connection-list.ts';
import { deleteCutConntrackEntries } from '../dataplanes/shared/ipvs-drain.ts';
import { conntrackDeleterIn } from '../harness/namespace-conntrack.ts';
import { Lab } from '../harness/netns.ts';
import { reportSection, round } from './measure.ts';

const { values } = parseArgs({
  options: {
    table: { type: 'string', default: '100000' },
    cut: { type: 'string', default: '1000,10000' },
    sample: { type: 'string', default: '20' },
  },
});
const TRAFFIC = fileURLToPath(new URL('./conntrack-cut-traffic.ts', import.meta.url));
const VIRTUAL = '10.20.30.42';
const SERVER = '127.0.0.2';

/** The old path's `conntrack -D` filter of a cut connection: its original tuple and real server. */
function exactFilter({ protocol, client, virtual, server }: IpvsConnection): string[] {
  return [
    ...(client.address.includes(':') ? ['-f', 'ipv6'] : []),
    ...['-p', protocol.toLowerCase(), '--orig-src', client.address, '--orig-dst', virtual.address],
    ...['--orig-port-src', String(client.port), '--orig-port-dst', String(virtual.port)],
    ...['--reply-src', server.address, '--reply-port-src', String(server.port)],
  ];
}

/** CPU seconds (user + system) of this process's waited-for children so far (/proc/self/stat). */
function childrenCpuSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  // cutime and cstime: fields 16 and 17 of stat(5), in clock ticks (100 a second on Linux).
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

async function measured<T>(fn: () => Promise<T>): Promise<{ result: T; wallS: number; cpuS: number }> {
  const cpu = childrenCpuSeconds();
  const started = performance.now();
  const result = await fn();
  return { result, wallS: (performance.now() - started) / 1000, cpuS: childrenCpuSeconds() - cpu };
}

const lab = new Lab('ctcut');
try {
  const ns = await lab.addNetns('node');
  const runner = execaRunner(['ip', 'netns', 'exec', ns], { timeoutMs: () => 30 * 60_000 });
  // Conntrack hooks in the namespace (a rule that needs them), the cut flows' DNAT, and flows
  // that outlive the bench.
  await lab.exec(ns, 'nft', ['-f', '-'], {
    input: `table ip bench {
      chain out { type filter hook output priority 0; ct state new counter; }
      chain nat { type nat hook output priority -100; ip daddr ${VIRTUAL} udp dport 53 dnat to ${SERVER}:53; }
    }\n`,
  });
  await lab.sysctl(ns, 'net.netfilter.nf_conntrack_udp_timeout', '3600');
  await lab.exec(ns, 'ip', ['addr', 'add', `${VIRTUAL}/32`, 'dev', 'lo']);
  const count = async () => Number((await lab.exec(ns, 'conntrack', ['-C'])).stdout.trim());
  const fill = await measured(() => runner.run(process.execPath, [TRAFFIC, 'fill', values.table]));
  if (fill.result.exitCode !== 0) throw new Error(fill.result.stderr);
  process.stderr.write(`table filled: ${await count()} entries in ${round(fill.wallS)} s\n`);
  let firstPort = 1024;
  for (const size of values.cut.split(',').map(Number)) {
    const made = await runner.run(process.execPath, [TRAFFIC, 'cut', String(size), String(firstPort)]);
    if (made.exitCode !== 0) throw new Error(made.stderr);
    const cut: IpvsConnection[] = Array.from({ length: size }, (_, i) => ({
      protocol: 'UDP',
      client: { address: '127.0.0.1', port: firstPort + i },
      virtual: { address: VIRTUAL, port: 53 },
      server: { address: SERVER, port: 53 },
      state: 'UDP',
    }));
    firstPort += size;
    const table = await count();
    const sample = cut.slice(0, Number(values.sample));
    const old = await measured(async () => {
      let deleted = 0;
      for (const connection of sample)
        deleted += await deleteConntrackEntries(runner, exactFilter(connection));
      return deleted;
    });
    const rest = cut.slice(sample.length);
    const netlink = await measured(() => deleteCutConntrackEntries(conntrackDeleterIn(runner), rest));
    // The child's start alone: what of the deleter's figures is node, not deletion.
    const start = await measured(() => conntrackDeleterIn(runner).deleteEntries([]));
    const perOld = { wall: old.wallS / sample.length, cpu: old.cpuS / sample.length };
    reportSection({
      [`conntrack-cut ${size} of ${table}`]: {
        oldSample: sample.length,
        oldDeleted: old.result,
        oldPerConnectionS: { wall: round(perOld.wall, 3), cpu: round(perOld.cpu, 3) },
        oldForAllS: { wall: round(perOld.wall * size), cpu: round(perOld.cpu * size) },
        netlinkEntries: rest.length,
        netlinkDeleted: netlink.result,
        netlinkS: { wall: round(netlink.wallS, 2), cpu: round(netlink.cpuS, 2) },
        childStartS: { wall: round(start.wallS, 2), cpu: round(start.cpuS, 2) },
        left: await count(),
      },
    });
  }
} finally {
  await lab.destroy();
}
