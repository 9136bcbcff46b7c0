// `kproxy diff`: what this node's kernel holds against what kproxy would install for the given
// objects, per Service port (the model: dataplanes/shared/drift/drift-report.ts). Exit 0 equal,
// 1 drift, 2 error.
import type { ParseArgsOptionsConfig } from 'node:util';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { driftJson, driftText, inSync } from '../../dataplanes/shared/drift/drift-report.ts';
import type { ProxyConfig } from '../config/config.ts';
import { PROXY_FLAG_OPTIONS } from '../config/proxy-flags.ts';
import { createDriftReader } from '../daemon/live-dataplanes.ts';
import { KubeClient } from '../kube/client.ts';
import { formatConfigError } from '../kube/connection.ts';
import { loadConnection } from '../kube/load-connection.ts';
import type { KubeObject } from '../kube/objects.ts';
import { listProxyObjects } from '../kube/proxy-objects.ts';
import { formatSourceWarning, readObjects } from '../sources/read-objects.ts';
import { commandFlags, usageError } from './command-flags.ts';
import { DIFF_USAGE } from './help.ts';
import { type CliIO, readAllText } from './io.ts';
import { createLogger } from './logger.ts';
import { buildState, type RenderRequest, renderRequest, withRenderNodeName } from './render.ts';

const DIFF_OPTIONS: ParseArgsOptionsConfig = {
  ...PROXY_FLAG_OPTIONS,
  mode: { type: 'string' },
  input: { type: 'string', multiple: true },
  example: { type: 'boolean' },
  'live-api': { type: 'boolean' },
  family: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export interface DiffDependencies {
  /** Runs nft, iptables-save, ipvsadm and ip (tests: inside their network namespace). */
  readonly runner?: CommandRunner;
  /** How long --live-api waits for the lists (LIVE_API_DEADLINE_MS; tests: shorter). */
  readonly liveApiDeadlineMs?: number;
}

export async function diffCommand(
  args: readonly string[],
  io: CliIO,
  dependencies: DiffDependencies = {},
): Promise<number> {
  const flags = commandFlags(io, 'diff', args, DIFF_OPTIONS, DIFF_USAGE);
  if (typeof flags === 'number') return flags;
  const request = await renderRequest({ ...flags, mode: flags.mode ?? flags['proxy-mode'] ?? 'nftables' });
  if ('exitCode' in request) return usageError(io, 'diff', request.message);
  const mode = request.config.mode;
  const fail = (message: string) => {
    io.stderr.write(`kproxy diff: ${message}\n`);
    return 2;
  };
  for (const warning of request.configWarnings) io.stderr.write(`warning: ${warning}\n`);
  const objects =
    flags['live-api'] === true
      ? await liveObjects(request.config, io, dependencies.liveApiDeadlineMs ?? LIVE_API_DEADLINE_MS)
      : await fileObjects(request, io);
  if (typeof objects === 'string') return fail(objects);
  const config = withRenderNodeName(request.config, request.example ? objects : []);
  const { state, warnings } = buildState(objects, config, request.families);
  for (const warning of warnings) io.stderr.write(`warning: ${warning}\n`);
  const compare = await createDriftReader(mode, {
    runner: dependencies.runner ?? execaRunner(),
    ipvs: config.ipvs,
  });
  try {
    const report = await compare(state);
    io.stdout.write(flags.json === true ? driftJson(report) : driftText(report));
    return inSync(report) ? 0 : 1;
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}

/** The objects of --input/--example, their warnings said; a string: why they cannot be read. */
async function fileObjects(request: RenderRequest, io: CliIO): Promise<readonly KubeObject[] | string> {
  const read = await readObjects(request.inputs, () => readAllText(io.stdin));
  if (!read.ok) return read.error;
  for (const warning of read.warnings) io.stderr.write(`warning: ${formatSourceWarning(warning)}\n`);
  return read.objects;
}

/**
 * How long --live-api waits for every list: the client gives up on a silent server after its
 * header (30 s) and body (60 s) timeouts, and the informers retry; past this, diff gives up too.
 */
export const LIVE_API_DEADLINE_MS = 120_000;

/** The cluster's objects as `kproxy run` lists them (--kubeconfig, --master, in-cluster). */
async function liveObjects(
  config: ProxyConfig,
  io: CliIO,
  deadlineMs: number,
): Promise<readonly KubeObject[] | string> {
  const connection = await loadConnection({
    ...(config.clientConnection.kubeconfig ? { kubeconfig: config.clientConnection.kubeconfig } : {}),
    ...(config.master ? { master: config.master } : {}),
    env: process.env,
  });
  if (!connection.ok) return `API server connection: ${formatConfigError(connection.error)}`;
  for (const warning of connection.warnings ?? []) io.stderr.write(`warning: ${warning}\n`);
  const client = new KubeClient(connection.connection, { env: process.env });
  try {
    return await listProxyObjects({
      api: client,
      nodeName: config.nodeName,
      proxyName: config.serviceProxyName,
      // A list the informers retry is said as kproxy run says it, on stderr.
      logger: createLogger(config.logging.format, 'warn', io.stderr),
      signal: AbortSignal.timeout(deadlineMs),
    });
  } catch {
    return `${connection.connection.server}: not every list answered within ${deadlineMs / 1000} s`;
  } finally {
    await client.close();
  }
}
