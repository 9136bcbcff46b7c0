// A ConntrackDeleter acting in another network namespace: the real netlink deleter in a child
// (conntrack-deleter-child.ts) started through a runner into that namespace (`ip netns exec NS`,
// `nsenter --net=...`), never a socket of the test process, which would reach the host's table.
import { fileURLToPath } from 'node:url';
import type { CommandRunner } from '../dataplanes/shared/command-runner.ts';
import type { ConntrackDeleter, DecodedEntry } from '../dataplanes/shared/conntrack/conntrack-netlink.ts';

const CHILD = fileURLToPath(new URL('./conntrack-deleter-child.ts', import.meta.url));

/** `runner` must run its commands inside the namespace, with a timeout that covers a node start. */
export function conntrackDeleterIn(runner: CommandRunner): ConntrackDeleter {
  return {
    async deleteEntries(entries) {
      const { stdout, stderr, exitCode } = await runner.run(
        process.execPath,
        [CHILD],
        JSON.stringify(entries),
      );
      if (exitCode !== 0) throw new Error(`conntrack deleter child (exit ${exitCode}): ${stderr.trim()}`);
      return (JSON.parse(stdout) as { deleted: number }).deleted;
    },
  };
}

/** The netlink reader of conntrack-netlink.ts (readEntries) in the namespace `runner` runs in. */
export function conntrackReaderIn(runner: CommandRunner): Required<Pick<ConntrackDeleter, 'readEntries'>> {
  return {
    async readEntries(tuples) {
      const { stdout, stderr, exitCode } = await runner.run(
        process.execPath,
        [CHILD],
        JSON.stringify({ read: tuples }),
      );
      if (exitCode !== 0) throw new Error(`conntrack reader child (exit ${exitCode}): ${stderr.trim()}`);
      return (JSON.parse(stdout) as { entries: (DecodedEntry | null)[] }).entries.map((e) => e ?? undefined);
    },
  };
}
