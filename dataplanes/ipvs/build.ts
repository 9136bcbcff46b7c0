// The one way to build the IPVS dataplane for this node: the daemon and `kproxy cleanup` call it,
// and nothing outside this folder needs to know its parts.
import type { DataplaneLog, LiveDataplane } from '../../contract/dataplane.ts';
import { type CommandRunner, execaRunner } from '../shared/command-runner.ts';
import { type ConntrackDeleter, netlinkConntrackDeleter } from '../shared/conntrack/conntrack-netlink.ts';
import type { DriftReader } from '../shared/drift/drift-report.ts';
import type { VirtualServiceKey } from '../shared/ipvs-connection-list.ts';
import type { DrainBound } from '../shared/ipvs-drain.ts';
import { NetlinkElementWriter } from '../shared/nft/netlink-elements.ts';
import { COMPANION_TABLE, companionSets } from './companion-ruleset.ts';
import { ipvsDriftReader } from './drift.ts';
import { boundAddresses } from './dummy-link.ts';
import { NetlinkIpvsClient } from './ipvs-client.ts';
import type { IpvsTimeouts } from './ipvs-messages.ts';
import { IpvsDataplane } from './live.ts';
import { recordedNodePortAddresses } from './ownership.ts';

export interface IpvsBuildOptions {
  /** How ip, nft, sysctl and conntrack are run; the real tools in this process' namespace by default. */
  readonly runner?: CommandRunner;
  readonly log: DataplaneLog;
  /** kube-proxy's ipvs section: scheduler (rr when absent), strictARP, timeouts, excludeCIDRs. */
  readonly scheduler?: string;
  readonly strictARP?: boolean;
  readonly timeouts?: IpvsTimeouts;
  readonly excludeCIDRs?: readonly string[];
  /** cleanup()'s drain before its virtual servers go: the default bound, told to `log`, by default. */
  readonly drain?: DrainBound;
  /**
   * Deletes the conntrack entries of the connections cleanup() cut: by netlink in this process'
   * namespace by default, where the tools run here too (none otherwise).
   */
  readonly conntrack?: ConntrackDeleter;
}

export function buildIpvsDataplane({ runner, log, conntrack, ...ipvs }: IpvsBuildOptions): LiveDataplane {
  return new IpvsDataplane({
    // The netlink socket lives in this process' namespace, so the tools must run here too.
    runner: runner ?? execaRunner(),
    openClient: () => NetlinkIpvsClient.open(),
    ...ipvs,
    // Like the IPVS socket, in this process' namespace: only where the tools run here too.
    elements: runner === undefined ? NetlinkElementWriter.open(COMPANION_TABLE, companionSets) : undefined,
    conntrack: conntrack ?? (runner === undefined ? netlinkConntrackDeleter : undefined),
    log,
  });
}

/**
 * What `kproxy diff` and the daemon's integrity checks compare (drift.ts), with the same scheduler;
 * `dataplane`, the daemon's, tells its draining real servers from ones someone added at weight 0.
 */
export function buildIpvsDriftReader({
  runner,
  scheduler,
  dataplane,
}: Pick<IpvsBuildOptions, 'runner' | 'scheduler'> & { readonly dataplane?: LiveDataplane }): DriftReader {
  const drains = dataplane instanceof IpvsDataplane ? dataplane.drains.bind(dataplane) : undefined;
  return ipvsDriftReader(runner ?? execaRunner(), scheduler ?? 'rr', drains);
}

/**
 * Whether a virtual service is on an address kproxy's IPVS mode holds now (ownership.ts: its link's
 * and its recorded node-port addresses), read once: `kproxy cleanup --kube-proxy` leaves those,
 * kube-proxy's taken over in place.
 */
export async function kproxyIpvsOwns(
  runner: CommandRunner = execaRunner(),
): Promise<(service: VirtualServiceKey) => boolean> {
  const bound = await boundAddresses(runner);
  // No address on its link (or no link): it serves nothing, node ports included (each NodePort
  // Service has a ClusterIP there), and its tables need not be read.
  if (bound.length === 0) return () => false;
  const addresses = new Set([...bound, ...(await recordedNodePortAddresses(runner))]);
  return (service) => addresses.has(service.address);
}
