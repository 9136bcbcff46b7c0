// A ConntrackDeleter acting in another network namespace: the real netlink deleter in a child
// (conntrack-deleter-child.ts) started through a runner into that namespace (`ip netns exec NS`,
// `nsenter --net=...`), never a socket of the test process, which would reach the host's table.
import { fileURLToPath } from 'node:url';
import type { CommandRunner } from '../dataplanes/shared/command-runner.ts';
import type { ConntrackDeleter } from '../dataplanes/shared/conntrack/conntrack-netlink.ts';

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
