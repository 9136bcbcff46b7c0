// Proxy mode → the live dataplane that programs this node's kernel. Loaded on demand so the
// daemon pays only for the mode it runs.
import type { Logger } from 'pino';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import type { DataplaneMode, LiveDataplane } from '../../dataplanes/shared/dataplane.ts';
import type { IpvsConfig } from '../config/config.ts';

export interface LiveDataplaneOptions {
  readonly logger: Logger;
  /** How kernel tools are run; the real ones by default. */
  readonly runner?: CommandRunner;
  /** The ipvs section of the configuration; defaults (rr, kernel timeouts) when absent, e.g. for cleanup. */
  readonly ipvs?: IpvsConfig;
}

type Factory = (options: LiveDataplaneOptions) => Promise<LiveDataplane>;

const FACTORIES: Record<DataplaneMode, Factory> = {
  async nftables({ logger, runner }) {
    const { NftablesDataplane } = await import('../../dataplanes/nftables/live.ts');
    const { commandNftRunner } = await import('../../dataplanes/nftables/nft-runner.ts');
    const { NetlinkElementWriter } = await import('../../dataplanes/shared/nft/netlink-elements.ts');
    const { familySets } = await import('../../dataplanes/nftables/base-objects.ts');
    const { TABLE } = await import('../../dataplanes/shared/nft/transaction.ts');
    const commands = runner ?? execaRunner();
    const log = logger.child({ dataplane: 'nftables' });
    return new NftablesDataplane({
      nft: commandNftRunner(commands),
      commands,
      // Elements by netlink only where nft runs: the socket lives in this process' namespace.
      elements: runner === undefined ? NetlinkElementWriter.open(TABLE, familySets) : undefined,
      log: (message, fields) => log.info(fields ?? {}, message),
    });
  },
  async iptables({ logger, runner }) {
    const { IptablesDataplane } = await import('../../dataplanes/iptables/live.ts');
    const log = logger.child({ dataplane: 'iptables' });
    return new IptablesDataplane({
      runner: runner ?? execaRunner(),
      log: (message, fields) => log.info(fields ?? {}, message),
    });
  },
  async ipvs({ logger, runner, ipvs }) {
    const { IpvsDataplane } = await import('../../dataplanes/ipvs/live.ts');
    const { NetlinkIpvsClient } = await import('../../dataplanes/ipvs/ipvs-client.ts');
    const { NetlinkElementWriter } = await import('../../dataplanes/shared/nft/netlink-elements.ts');
    const { COMPANION_TABLE, companionSets } = await import('../../dataplanes/ipvs/companion-ruleset.ts');
    const log = logger.child({ dataplane: 'ipvs' });
    const seconds = (ms: number | undefined) => Math.round((ms ?? 0) / 1000);
    return new IpvsDataplane({
      // The netlink socket lives in this process' namespace, so the tools must run here too.
      runner: runner ?? execaRunner(),
      openClient: () => NetlinkIpvsClient.open(),
      scheduler: ipvs?.scheduler ?? 'rr',
      strictARP: ipvs?.strictARP ?? false,
      timeouts: {
        tcpSeconds: seconds(ipvs?.tcpTimeoutMs),
        tcpFinSeconds: seconds(ipvs?.tcpFinTimeoutMs),
        udpSeconds: seconds(ipvs?.udpTimeoutMs),
      },
      excludeCIDRs: ipvs?.excludeCIDRs ?? [],
      // Like the IPVS socket, in this process' namespace: only where the tools run here too.
      elements: runner === undefined ? NetlinkElementWriter.open(COMPANION_TABLE, companionSets) : undefined,
      log: (message, fields) => log.info(fields ?? {}, message),
    });
  },
};

/** Every mode kproxy can program. */
export const LIVE_MODES = Object.keys(FACTORIES) as DataplaneMode[];

export function createLiveDataplane(
  mode: DataplaneMode,
  options: LiveDataplaneOptions,
): Promise<LiveDataplane> {
  return FACTORIES[mode](options);
}
