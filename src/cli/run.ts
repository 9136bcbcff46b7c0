// `kproxy run`: the daemon. Configuration (file + kube-proxy flags) → one instance per node →
// conntrack sysctls → API connection → the mode's live dataplane → the sync loop, until SIGTERM or
// SIGINT, which stop it cleanly and leave the rules in place.
import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, hostname } from 'node:os';
import type { ParseArgsOptionsConfig } from 'node:util';
import type { Logger } from 'pino';
import { systemClock } from '../../contract/base/clock.ts';
import type { DataplaneMode, LiveDataplane } from '../../contract/dataplane.ts';
import type { NfacctCounters } from '../../dataplanes/iptables/nfacct.ts';
import type { ProxyConfig } from '../config/config.ts';
import { configYaml } from '../config/config-yaml.ts';
import { loadCommandLineConfig } from '../config/kube-proxy-precedence.ts';
import { type FlagValues, PROXY_FLAGS, proxyFlagOptions } from '../config/proxy-flags.ts';
import { toProxyOptions } from '../config/proxy-options.ts';
import { applyConntrackSysctls } from '../daemon/conntrack-sysctls.ts';
import { startDaemon } from '../daemon/daemon.ts';
import { acquireInstanceLock } from '../daemon/instance-lock.ts';
import { createDriftReader, createLiveDataplane, LIVE_MODES } from '../daemon/live-dataplanes.ts';
import { explicitLoopbackFamilies, LOOPBACK, LocalhostNodePorts } from '../daemon/localhost-node-ports.ts';
import {
  type NfacctPacketMetric,
  openIptablesCounters,
  type PacketCount,
} from '../daemon/nfacct-packet-metrics.ts';
import { applyOomScoreAdj } from '../daemon/oom-score-adj.ts';
import { OtherModesCleanup } from '../daemon/other-modes-cleanup.ts';
import { applyRouteLocalnet } from '../daemon/route-localnet.ts';
import { KubeClient } from '../kube/client.ts';
import { formatConfigError } from '../kube/connection.ts';
import { loadConnection } from '../kube/load-connection.ts';
import { TokenBucket } from '../kube/rate-limiter.ts';
import { registerRestClientMetrics } from '../kube/rest-client-metrics.ts';
import { ProxyMetrics } from '../sync/metrics.ts';
import { cleanupCommand } from './cleanup.ts';
import { commandFlags, usageError } from './command-flags.ts';
import { flagLines } from './help.ts';
import type { CliIO } from './io.ts';
import { createLogger } from './logger.ts';
import { printVersion } from './version.ts';

const RUN_OPTIONS: ParseArgsOptionsConfig = {
  ...proxyFlagOptions(Object.keys(PROXY_FLAGS)),
  help: { type: 'boolean', short: 'h' },
};

export const RUN_USAGE = `Usage: kproxy run [--config FILE] [kube-proxy flags]

Runs the node proxy: watches Services and EndpointSlices and keeps this node's rules in sync.
Stops on SIGTERM/SIGINT and leaves the rules in place (kproxy cleanup removes them).
Modes that can run here: ${LIVE_MODES.join(', ')}.

Flags are read as kube-proxy reads them (pflag: --flag=value, --flag value, -v=2, --bool=false,
\`--\` ends them). With --config, kube-proxy ignores every flag bound to a field of the file except
-v, --hostname-override and --master; kproxy does the same and warns of each flag it ignores. Flags
that have no effect here are accepted with a warning that says why. --write-config-to FILE checks a
command line without starting: it writes the effective configuration and exits.

${flagLines(Object.keys(PROXY_FLAGS))}
  -h, --help                                 this help
`;

/** What the command needs from the process; tests replace it. */
export interface RunEnvironment {
  readonly env: NodeJS.ProcessEnv;
  readonly procRoot: string;
  /** "/sys": the conntrack hash size is written there; tests give a temporary tree. */
  readonly sysRoot: string;
  /** Resolves with the signal's name when the process is asked to stop. */
  shutdownRequested(): Promise<string>;
  /** Names the instance lock; tests use their own so a kproxy running on the machine is no obstacle. */
  readonly lockPrefix?: string;
  /** The dataplane for a mode; the real kernel one by default. */
  readonly dataplane?: (mode: DataplaneMode, logger: Logger) => Promise<LiveDataplane>;
  /** nfacct counters (iptables mode): the kernel's, in this process' network namespace. */
  readonly nfacct: NfacctCounters;
}

/**
 * The kernel's nfacct counters, loaded on first use: only iptables mode opens one, and loading the
 * netlink package is a cost on every mode's way to its first sync.
 */
const kernelNfacct: NfacctCounters = {
  ensure: async (name) => (await import('../../dataplanes/iptables/nfacct.ts')).netlinkNfacct.ensure(name),
  packets: async (name) => (await import('../../dataplanes/iptables/nfacct.ts')).netlinkNfacct.packets(name),
};

export function processRunEnvironment(): RunEnvironment {
  // Listening from the start: a signal during start-up still stops the daemon cleanly. `on`, not
  // `once`: execa's signal-exit re-raises a signal it finds no other listener for, and a `once`
  // listener is gone by then, so a SIGTERM during any kernel command killed kproxy outright.
  const requested = new Promise<string>((resolve) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => resolve(signal));
  });
  return {
    env: process.env,
    procRoot: '/proc',
    sysRoot: '/sys',
    shutdownRequested: () => requested,
    nfacct: kernelNfacct,
  };
}

/** Why this mode: the first log line says it, however it was chosen. */
export function modeReason(config: ProxyConfig, flags: FlagValues): string {
  if (typeof flags['proxy-mode'] === 'string' && flags['proxy-mode'] !== '') return '--proxy-mode';
  if (!config.modeDefaulted) return `mode in ${flags.config}`;
  return (
    "no mode set: kproxy's default, nftables (kube-proxy 1.37 would take iptables: node ports on every " +
    'local IP and on 127.0.0.1; kproxy follows KEP-5343, which makes nftables the default in 1.40; ' +
    "set --proxy-mode=iptables for kube-proxy 1.37's behaviour)"
  );
}

/** kube-proxy's -v levels onto pino's: 0-1 info, 2-3 debug, 4 and up trace. */
export function logLevel(verbosity: number): 'info' | 'debug' | 'trace' {
  return verbosity >= 4 ? 'trace' : verbosity >= 2 ? 'debug' : 'info';
}

export async function runCommand(
  args: readonly string[],
  io: CliIO,
  environment: RunEnvironment = processRunEnvironment(),
): Promise<number> {
  const given = commandFlags(io, 'run', args, RUN_OPTIONS, RUN_USAGE);
  if (typeof given === 'number') return given;
  if (given.version === true) return printVersion(io);
  const loaded = await loadCommandLineConfig(given, {
    readFile: (path) => readFile(path, 'utf8'),
    hostname: hostname(),
  });
  if (!loaded.ok) {
    if (loaded.usage) return usageError(io, 'run', loaded.error);
    io.stderr.write(`kproxy run: ${loaded.error}\n`);
    return 1;
  }
  const { config, flags } = loaded;
  // On stdout, in kube-proxy's format: journald (or the container runtime) collects the lines.
  const logger = createLogger(config.logging.format, logLevel(config.logging.verbosity), io.stdout);
  logger.info({ mode: config.mode, reason: modeReason(config, flags) }, `proxy mode ${config.mode}`);
  // Flags without effect or ignored, the file's fields that do nothing here, kube-proxy's lenient
  // decoding: said once, at start (render, trace and diff print the same).
  for (const warning of loaded.warnings) logger.warn(warning);
  logger.debug({ config }, 'effective configuration');
  const writeTo = flags['write-config-to'];
  if (typeof writeTo === 'string') {
    try {
      await writeFile(writeTo, configYaml(config));
    } catch (error) {
      io.stderr.write(`kproxy run: --write-config-to: ${(error as Error).message}\n`);
      return 1;
    }
    logger.info({ file: writeTo }, 'wrote configuration');
    return 0;
  }
  // kube-proxy's --cleanup: every mode's rules, its own and (here) kproxy's, then exit.
  if (flags.cleanup === true) return cleanupCommand(['--kube-proxy'], io);
  const fail = (message: string) => {
    logger.fatal(message);
    io.stderr.write(`kproxy run: ${message}\n`);
    return 1;
  };

  const lock = await acquireInstanceLock(environment.lockPrefix ? { prefix: environment.lockPrefix } : {});
  if (!lock.ok) return fail(lock.message);
  try {
    return await runLocked(config, logger, environment, fail, flags['init-only'] === true);
  } finally {
    await lock.lock.release();
  }
}

async function runLocked(
  config: ProxyConfig,
  logger: Logger,
  environment: RunEnvironment,
  fail: (message: string) => number,
  initOnly: boolean,
): Promise<number> {
  const oom = await applyOomScoreAdj(config.oomScoreAdj, environment.procRoot);
  if (oom.applied && oom.from !== oom.to) logger.info({ from: oom.from, to: oom.to }, 'set oom_score_adj');
  if (!oom.applied) logger.warn({ reason: oom.reason }, `oomScoreAdj ${oom.to} not applied`);
  const sysctls = await applyConntrackSysctls(config.conntrack, {
    procRoot: environment.procRoot,
    sysRoot: environment.sysRoot,
    cores: availableParallelism(),
  });
  const localnet = await applyRouteLocalnet(toProxyOptions(config), environment.procRoot);
  for (const action of [...sysctls.actions, ...localnet]) {
    if (action.action === 'set')
      logger.info({ sysctl: action.key, from: action.from, to: action.to }, 'set sysctl');
    else logger.info({ sysctl: action.key, reason: action.reason }, 'left sysctl as it is');
  }
  if (!sysctls.ok) return fail(sysctls.error);
  // kube-proxy's --init-only: what needs full root is done; a later run needs only CAP_NET_ADMIN.
  if (initOnly) return 0;
  // Leaving the IPVS mode, its cleanup drains IPVS first (other-modes-cleanup.ts); a stop does not
  // wait for that (its waits hold no reference): the next start drains again.
  const ipvsDrain = {
    report: (line: string) => logger.info(line),
    sleep: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()),
  };
  const makeDataplane =
    environment.dataplane ??
    ((mode, log) => createLiveDataplane(mode, { logger: log, ipvs: config.ipvs, ipvsDrain }));
  const own = await makeDataplane(config.mode, logger);
  // Another mode's leftovers go once this mode's first full sync has committed (other-modes-cleanup.ts).
  const dataplane = new OtherModesCleanup(
    own,
    () =>
      Promise.all(
        LIVE_MODES.filter((mode) => mode !== config.mode).map((mode) => makeDataplane(mode, logger)),
      ),
    {
      removed: (mode, what) =>
        logger.info({ mode, removed: what }, 'removed what an earlier run in another mode left'),
      failed: (error) =>
        logger.warn(
          { err: error },
          'could not remove what an earlier run in another mode left; trying again after the next full sync',
        ),
    },
  );
  const nfacctPackets =
    config.mode === 'iptables'
      ? await openIptablesCounters(environment.nfacct, ({ counter, metric }, reason) =>
          logger.warn(
            { reason },
            `no nfacct counter ${counter} here: its packets are not counted (${metric} left out)`,
          ),
        )
      : new Map<NfacctPacketMetric, PacketCount>();

  const connection = await loadConnection({
    ...(config.clientConnection.kubeconfig ? { kubeconfig: config.clientConnection.kubeconfig } : {}),
    ...(config.master ? { master: config.master } : {}),
    env: environment.env,
  });
  if (!connection.ok) return fail(`API server connection: ${formatConfigError(connection.error)}`);
  for (const warning of connection.warnings ?? []) logger.warn(warning);
  const { qps, burst } = config.clientConnection;
  const metrics = new ProxyMetrics(config.mode);
  const localhostFamilies =
    config.mode === 'nftables' ? explicitLoopbackFamilies(config.nodePortAddresses) : [];
  // nftables mode serves localhost node ports from userspace, as kube-proxy (localhost-node-ports.ts).
  const localhost =
    localhostFamilies.length > 0
      ? new LocalhostNodePorts(dataplane, { logger, families: localhostFamilies, registry: metrics.registry })
      : undefined;
  if (localhost) {
    logger.info(
      { addresses: localhostFamilies.map((family) => LOOPBACK[family]) },
      'localhost node ports: TCP NodePorts relayed from these addresses by a userspace forwarder',
    );
  }
  const client = new KubeClient(connection.connection, {
    env: environment.env,
    rateLimiter: new TokenBucket(qps, burst, systemClock),
    onRequest: registerRestClientMetrics(metrics.registry, new URL(connection.connection.server).host),
  });

  const started = await startDaemon({
    config,
    logger,
    api: client,
    metrics,
    dataplane: localhost ?? dataplane,
    clock: systemClock,
    nfacctPackets,
    // The kernel's rules are compared only where the kernel's dataplane programs them.
    drift: environment.dataplane
      ? undefined
      : await createDriftReader(config.mode, { ipvs: config.ipvs, dataplane: own }),
  });
  if (!started.ok) {
    localhost?.close();
    await client.close();
    return fail(started.error);
  }
  logger.info(
    {
      mode: config.mode,
      node: config.nodeName,
      server: connection.connection.server,
      ...(client.proxy ? { proxy: client.proxy } : {}),
      healthz: started.daemon.healthzUrl,
      metrics: started.daemon.metricsUrl,
    },
    'kproxy started',
  );
  const signal = await environment.shutdownRequested();
  logger.info({ signal }, 'stopping');
  await started.daemon.stop();
  localhost?.close();
  await client.close();
  return 0;
}
