// `kproxy cleanup [--mode M] [--kube-proxy] [--ipvs-drain-timeout D | --script]`: removes the
// rules kproxy owns (every mode this build can program, or only M), and with --kube-proxy also
// what an upstream kube-proxy left behind; IPVS virtual services, kube-proxy's and kproxy's IPVS
// mode's, go once their connections drained, up to D. Nothing else is touched. Run it after
// stopping the daemon: the daemon leaves its rules on stop. With --script it removes nothing and
// prints the same removals as a shell script that needs nothing of kproxy's (cleanup-script.ts),
// which the package's purge runs once kproxy is gone.
import { existsSync } from 'node:fs';
import type { ParseArgsOptionsConfig } from 'node:util';
import type { CleanupCommand, DataplaneMode } from '../../contract/dataplane.ts';
import { kproxyIpvsOwns } from '../../dataplanes/ipvs/build.ts';
import { NetlinkIpvsClient } from '../../dataplanes/ipvs/ipvs-client.ts';
import type { VirtualService } from '../../dataplanes/ipvs/virtual-servers.ts';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { netlinkConntrackDeleter } from '../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import type { VirtualServiceKey } from '../../dataplanes/shared/ipvs-connection-list.ts';
import { DEFAULT_IPVS_DRAIN_MS } from '../../dataplanes/shared/ipvs-drain.ts';
import {
  type LeftoverOptions,
  removeKubeProxyLeftovers,
  type VirtualServiceTable,
} from '../../dataplanes/shared/kube-proxy-leftovers.ts';
import { formatGoDuration, parseGoDuration } from '../config/go-duration.ts';
import { createLiveDataplane, LIVE_MODES } from '../daemon/live-dataplanes.ts';
import { cleanupScript } from './cleanup-script.ts';
import { commandFlags, usageError } from './command-flags.ts';
import type { CliIO } from './io.ts';
import { createLogger } from './logger.ts';

const CLEANUP_OPTIONS: ParseArgsOptionsConfig = {
  mode: { type: 'string' },
  'kube-proxy': { type: 'boolean' },
  'ipvs-drain-timeout': { type: 'string' },
  script: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export const CLEANUP_USAGE = `Usage: kproxy cleanup [--mode MODE] [--kube-proxy] [--ipvs-drain-timeout DURATION | --script]

Removes every rule kproxy owns (nft tables "kproxy", iptables KPROXY-* chains, IPVS mode's
kproxy-ipvs0 link, virtual servers and "kproxy-ipvs" tables), for MODE only when given
(${LIVE_MODES.join(', ')}). With --kube-proxy, also removes upstream kube-proxy's
nft "kube-proxy" tables, KUBE-* chains (not kubelet's) of iptables-nft and iptables-legacy, and
its IPVS mode's kube-ipvs0 link and ipsets and, when ip_vs is loaded, every IPVS virtual service
(as kube-proxy's own cleanup does) but those kproxy's IPVS mode holds (took over in place). Only
what exists is touched (no iptables backend's table is created to be emptied), and only what was
removed is printed. Stop the daemon first. kproxy's IPVS virtual servers stay while kube-proxy's
kube-ipvs0 is on the node: kube-proxy's IPVS mode, started again, took over those it serves.

kube-proxy's chains and tables go first, so that new connections meet kproxy's rules. Then, before
IPVS virtual services go (kube-proxy's, or kproxy's IPVS mode's once another mode or proxy took
over), it waits while IPVS still balances a TCP or SCTP connection to one of them
(not one in TIME_WAIT or CLOSE; UDP is not waited for, as kube-proxy's own graceful termination
does not), printing what it waits for, at most --ipvs-drain-timeout (a Go duration; default
${formatGoDuration(DEFAULT_IPVS_DRAIN_MS)}, long enough for connections that end by themselves:
HTTP keep-alive idles out within 5-75 s in common servers and load balancers; what is still open
then is a long-lived stream that would never end, and gets the reset it gets at any pod restart;
0: no wait). Then the services and their link go, and the conntrack entries of the connections IPVS
still balanced (their exact tuples), so that a UDP flow, or a TCP connection held past the bound,
meets the rules that took over at its next packet (UDP balanced afresh, TCP reset) instead of
being dropped.

With --script, removes nothing: prints a POSIX shell script that removes what kproxy's own rules
are now with the node's tools (nft, iptables-*-restore, ip; ipvsadm for IPVS virtual servers),
each removal only while its checks hold and reported when it fails or lacks its tool. The
package's removal writes it to /var/lib/kproxy/purge.sh, and a purge runs it.
`;

/** This network namespace's IPVS table, when ip_vs is loaded (opening it would load the module). */
async function openIpvsIfLoaded(): Promise<VirtualServiceTable<VirtualService> | undefined> {
  return existsSync('/proc/net/ip_vs') ? NetlinkIpvsClient.open() : undefined;
}

/** What the cleanup reaches by netlink rather than through the runner: IPVS and conntrack. */
export type CleanupNetlink = Pick<LeftoverOptions<VirtualServiceKey>, 'openIpvs' | 'conntrack'>;

export async function cleanupCommand(
  args: readonly string[],
  io: CliIO,
  runner?: CommandRunner,
  /**
   * By default in this process's namespace; a runner into another one brings its own (without
   * them, IPVS is not touched).
   */
  netlink: CleanupNetlink = runner === undefined
    ? { openIpvs: openIpvsIfLoaded, conntrack: netlinkConntrackDeleter }
    : {},
): Promise<number> {
  const flags = commandFlags(io, 'cleanup', args, CLEANUP_OPTIONS, CLEANUP_USAGE);
  if (typeof flags === 'number') return flags;
  const mode = flags.mode as string | undefined;
  if (mode !== undefined && !LIVE_MODES.includes(mode as DataplaneMode)) {
    return usageError(
      io,
      'cleanup',
      `--mode: ${JSON.stringify(mode)} is not one of ${LIVE_MODES.join(', ')}`,
    );
  }
  if (flags.script && flags['kube-proxy']) {
    return usageError(io, 'cleanup', '--script covers kproxy’s own rules only, not --kube-proxy');
  }
  const drainText = flags['ipvs-drain-timeout'] as string | undefined;
  const drainMs = drainText === undefined ? DEFAULT_IPVS_DRAIN_MS : parseGoDuration(drainText);
  if (drainText !== undefined && flags.script) {
    return usageError(io, 'cleanup', '--ipvs-drain-timeout: --script removes at once, it drains nothing');
  }
  if (drainMs === undefined || drainMs < 0) {
    return usageError(
      io,
      'cleanup',
      `--ipvs-drain-timeout: ${JSON.stringify(drainText)} is not a duration of 0 or more`,
    );
  }
  const commands = runner ?? execaRunner();
  const logger = createLogger('text', 'warn', io.stderr);
  const drain = { timeoutMs: drainMs, report: (line: string) => io.stdout.write(`${line}\n`) };
  try {
    if (flags.script) {
      const removals: CleanupCommand[] = [];
      for (const each of mode ? [mode as DataplaneMode] : LIVE_MODES) {
        const dataplane = await createLiveDataplane(each, { logger, runner: commands });
        removals.push(...(await dataplane.cleanupCommands()));
      }
      io.stdout.write(cleanupScript(removals));
      return 0;
    }
    for (const each of mode ? [mode as DataplaneMode] : LIVE_MODES) {
      const dataplane = await createLiveDataplane(each, {
        logger,
        runner: commands,
        ipvsDrain: drain,
        conntrack: netlink.conntrack,
      });
      const removed = await dataplane.cleanup();
      for (const what of removed) io.stdout.write(`removed ${what} (kproxy ${each} mode)\n`);
      if (removed.length === 0) io.stdout.write(`no kproxy ${each} rules found\n`);
    }
    if (flags['kube-proxy']) {
      const removed = await removeKubeProxyLeftovers(commands, {
        ...netlink,
        drain,
        kproxyOwns: () => kproxyIpvsOwns(commands),
      });
      for (const what of removed) io.stdout.write(`removed ${what}\n`);
      if (removed.length === 0) io.stdout.write('no kube-proxy leftovers found\n');
    }
  } catch (error) {
    io.stderr.write(`kproxy cleanup: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  return 0;
}
