// `kproxy diff`: what this node's kernel holds against what kproxy would install for the given
// objects, per Service port (the model: dataplanes/shared/drift/drift-report.ts). Exit 0 equal,
// 1 drift, 2 error.
import type { ParseArgsOptionsConfig } from 'node:util';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { driftJson, driftText, inSync } from '../../dataplanes/shared/drift/drift-report.ts';
import { PROXY_FLAG_OPTIONS } from '../config/proxy-flags.ts';
import { createDriftReader } from '../daemon/live-dataplanes.ts';
import { formatSourceWarning, readObjects } from '../sources/read-objects.ts';
import { commandFlags, usageError } from './command-flags.ts';
import { DIFF_USAGE } from './help.ts';
import { type CliIO, readAllText } from './io.ts';
import { buildState, renderRequest, withRenderNodeName } from './render.ts';

const DIFF_OPTIONS: ParseArgsOptionsConfig = {
  ...PROXY_FLAG_OPTIONS,
  mode: { type: 'string' },
  input: { type: 'string', multiple: true },
  example: { type: 'boolean' },
  family: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export interface DiffDependencies {
  /** Runs nft, unshare and ip (tests: inside their network namespace). */
  readonly runner?: CommandRunner;
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
  const read = await readObjects(request.inputs, () => readAllText(io.stdin));
  if (!read.ok) return fail(read.error);
  for (const warning of read.warnings) io.stderr.write(`warning: ${formatSourceWarning(warning)}\n`);
  const config = withRenderNodeName(request.config, request.example ? read.objects : []);
  const { state, warnings } = buildState(read.objects, config, request.families);
  for (const warning of warnings) io.stderr.write(`warning: ${warning}\n`);
  const compare = await createDriftReader(mode, {
    runner: dependencies.runner ?? execaRunner(),
    ipvs: config.ipvs,
  });
  if (!compare)
    return usageError(io, 'diff', `--mode ${mode}: diff reads the nftables and iptables modes only yet`);
  try {
    const report = await compare(state);
    io.stdout.write(flags.json === true ? driftJson(report) : driftText(report));
    return inSync(report) ? 0 : 1;
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}
