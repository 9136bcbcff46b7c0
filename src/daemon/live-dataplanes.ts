// Proxy mode → the live dataplane that programs this node's kernel. Loaded on demand so the
// daemon pays only for the mode it runs.
import type { Logger } from 'pino';
import type { DataplaneLog, DataplaneMode, LiveDataplane } from '../../contract/dataplane.ts';
import type { CommandRunner } from '../../dataplanes/shared/command-runner.ts';
import type { ConntrackDeleter } from '../../dataplanes/shared/conntrack/conntrack-netlink.ts';
import type { DriftReader } from '../../dataplanes/shared/drift/drift-report.ts';
import type { DrainBound } from '../../dataplanes/shared/ipvs-drain.ts';
import type { IpvsConfig } from '../config/config.ts';

export interface LiveDataplaneOptions {
  readonly logger: Logger;
  /** How kernel tools are run; the real ones by default. */
  readonly runner?: CommandRunner;
  /** The ipvs section of the configuration; defaults (rr, kernel timeouts) when absent, e.g. for cleanup. */
  readonly ipvs?: IpvsConfig;
  /** IPVS mode's cleanup drain (`kproxy cleanup --ipvs-drain-timeout`); its default bound, logged, when absent. */
  readonly ipvsDrain?: DrainBound;
  /**
   * Deletes the conntrack entries of the connections IPVS mode's cleanup cut, in the runner's
   * namespace; by netlink in this process' when no runner is given.
   */
  readonly conntrack?: ConntrackDeleter;
}

type Factory = (options: LiveDataplaneOptions) => Promise<LiveDataplane>;

const FACTORIES: Record<DataplaneMode, Factory> = {
  async nftables({ logger, runner, ipvs }) {
    const { buildNftablesDataplane } = await import('../../dataplanes/nftables/build.ts');
    return buildNftablesDataplane({
      runner,
      log: logTo(logger, 'nftables'),
      // ipvs.scheduler's nftables counterpart (dataplanes/nftables/scheduler.ts).
      scheduler: ipvs?.scheduler,
      warn: (message) => logger.child({ dataplane: 'nftables' }).warn(message),
    });
  },
  async iptables({ logger, runner }) {
    const { buildIptablesDataplane } = await import('../../dataplanes/iptables/build.ts');
    return buildIptablesDataplane({ runner, log: logTo(logger, 'iptables') });
  },
  async ipvs({ logger, runner, ipvs, ipvsDrain, conntrack }) {
    const { buildIpvsDataplane } = await import('../../dataplanes/ipvs/build.ts');
    const seconds = (ms: number | undefined) => Math.round((ms ?? 0) / 1000);
    return buildIpvsDataplane({
      runner,
      log: logTo(logger, 'ipvs'),
      scheduler: ipvs?.scheduler ?? 'rr',
      strictARP: ipvs?.strictARP ?? false,
      timeouts: {
        tcpSeconds: seconds(ipvs?.tcpTimeoutMs),
        tcpFinSeconds: seconds(ipvs?.tcpFinTimeoutMs),
        udpSeconds: seconds(ipvs?.udpTimeoutMs),
      },
      excludeCIDRs: ipvs?.excludeCIDRs ?? [],
      drain: ipvsDrain,
      conntrack,
    });
  },
};

/** A dataplane's reports as info lines of the daemon's logger, tagged with the mode. */
function logTo(logger: Logger, mode: DataplaneMode): DataplaneLog {
  const log = logger.child({ dataplane: mode });
  return (message, fields) => log.info(fields ?? {}, message);
}

/** Every mode kproxy can program. */
export const LIVE_MODES = Object.keys(FACTORIES) as DataplaneMode[];

export function createLiveDataplane(
  mode: DataplaneMode,
  options: LiveDataplaneOptions,
): Promise<LiveDataplane> {
  return FACTORIES[mode](options);
}

export interface DriftReaderOptions extends Omit<LiveDataplaneOptions, 'logger'> {
  /** The daemon's own dataplane of the mode, whose record tells what it keeps on purpose (IPVS draining). */
  readonly dataplane?: LiveDataplane;
}

type DriftFactory = (options: DriftReaderOptions) => Promise<DriftReader>;

/** How each mode's rules are compared, for `kproxy diff` and the daemon's integrity checks. */
const DRIFT_FACTORIES: Record<DataplaneMode, DriftFactory> = {
  async nftables({ runner, ipvs }) {
    const { buildNftablesDriftReader } = await import('../../dataplanes/nftables/build.ts');
    return buildNftablesDriftReader({ runner, scheduler: ipvs?.scheduler });
  },
  async iptables({ runner }) {
    const { buildIptablesDriftReader } = await import('../../dataplanes/iptables/build.ts');
    return buildIptablesDriftReader({ runner });
  },
  async ipvs({ runner, ipvs, dataplane }) {
    const { buildIpvsDriftReader } = await import('../../dataplanes/ipvs/build.ts');
    return buildIpvsDriftReader({ runner, scheduler: ipvs?.scheduler, dataplane });
  },
};

/** The mode's drift reader (drift-report.ts). */
export function createDriftReader(
  mode: DataplaneMode,
  options: DriftReaderOptions = {},
): Promise<DriftReader> {
  return DRIFT_FACTORIES[mode](options);
}
