// Proxy mode → the live dataplane that programs this node's kernel. Loaded on demand so the
// daemon pays only for the mode it runs.
import type { Logger } from 'pino';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import type { DataplaneMode, LiveDataplane } from '../../dataplanes/shared/dataplane.ts';

export interface LiveDataplaneOptions {
  readonly logger: Logger;
  /** How kernel tools are run; the real ones by default. */
  readonly runner?: CommandRunner;
}

type Factory = (options: LiveDataplaneOptions) => Promise<LiveDataplane>;

const FACTORIES: Partial<Record<DataplaneMode, Factory>> = {
  async nftables({ logger, runner }) {
    const { NftablesDataplane } = await import('../../dataplanes/nftables/live.ts');
    const { commandNftRunner } = await import('../../dataplanes/nftables/nft-runner.ts');
    const commands = runner ?? execaRunner();
    const log = logger.child({ dataplane: 'nftables' });
    return new NftablesDataplane({
      nft: commandNftRunner(commands),
      commands,
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
};

/** Modes this build can program; the others can only be rendered (or not at all). */
export const LIVE_MODES = Object.keys(FACTORIES) as DataplaneMode[];

export function createLiveDataplane(
  mode: DataplaneMode,
  options: LiveDataplaneOptions,
): Promise<LiveDataplane> | undefined {
  return FACTORIES[mode]?.(options);
}
