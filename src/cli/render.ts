// `kproxy render`: cluster objects from files → the dataplane's ruleset on stdout (a dry run that
// touches nothing), or with --since the incremental transaction from an older snapshot.
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import type { ParseArgsOptionsConfig } from 'node:util';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { printInputs, SCRIPT_PREAMBLE, shellScript } from '../../contract/tool-inputs.ts';
import type { ProxyConfig } from '../config/config.ts';
import { type CommandLineConfigResult, loadCommandLineConfig } from '../config/kube-proxy-precedence.ts';
import type { FlagValues } from '../config/proxy-flags.ts';
import { PROXY_FLAG_OPTIONS } from '../config/proxy-flags.ts';
import { toProxyOptions } from '../config/proxy-options.ts';
import type { KubeObject } from '../kube/objects.ts';
import { buildProxyState } from '../model/build-state.ts';
import { groupObjects } from '../sources/cluster-objects.ts';
import { EXAMPLE_CLUSTER_PATH, EXAMPLE_CONFIG_PATH } from '../sources/example-cluster.ts';
import { formatSourceNote, formatSourceWarning, readObjects } from '../sources/read-objects.ts';
import { commandFlags, usageError } from './command-flags.ts';
import { RENDER_USAGE } from './help.ts';
import { type CliIO, readAllText } from './io.ts';
import { loadPlanner } from './planners.ts';
import { renderSince } from './render-rounds.ts';

const RENDER_OPTIONS: ParseArgsOptionsConfig = {
  ...PROXY_FLAG_OPTIONS,
  mode: { type: 'string' },
  input: { type: 'string', multiple: true },
  example: { type: 'boolean' },
  since: { type: 'string', multiple: true },
  chunks: { type: 'boolean' },
  script: { type: 'boolean' },
  strict: { type: 'boolean' },
  family: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

/** --family's values. */
export const FAMILY_FLAG: Readonly<Record<string, readonly IPFamily[]>> = {
  ipv4: ['IPv4'],
  ipv6: ['IPv6'],
  both: ['IPv4', 'IPv6'],
};

export interface RenderRequest {
  readonly inputs: readonly string[];
  readonly since: readonly string[];
  readonly example: boolean;
  readonly strict: boolean;
  /** Print the inputs as the live dataplane splits them (planner.chunkInputs). */
  readonly chunks: boolean;
  /** Print a POSIX shell script that applies each input with its tool (tool-inputs.ts). */
  readonly script: boolean;
  readonly families: readonly IPFamily[];
  readonly config: ProxyConfig;
  /** What `kproxy run` logs at start for these flags and file, in its words (no-effect flags, ...). */
  readonly configWarnings: readonly string[];
}

/** A reason to stop: 2 for a wrong command line, 1 for anything else the user can fix. */
interface Failure {
  readonly exitCode: 1 | 2;
  readonly message: string;
}

export async function renderCommand(args: readonly string[], io: CliIO): Promise<number> {
  const fail = ({ exitCode, message }: Failure) => {
    if (exitCode === 2) return usageError(io, 'render', message);
    io.stderr.write(`kproxy render: ${message}\n`);
    return exitCode;
  };
  const flags = commandFlags(io, 'render', args, RENDER_OPTIONS, RENDER_USAGE);
  if (typeof flags === 'number') return flags;
  const request = await renderRequest(flags);
  if ('exitCode' in request) return fail(request);
  const plannerLoad = loadPlanner(request.config);

  const stdinText = once(() => readAllText(io.stdin));
  const current = await readObjects(request.inputs, stdinText);
  if (!current.ok) return fail({ exitCode: 1, message: current.error });
  const previous = request.since.length > 0 ? await readObjects(request.since, stdinText) : undefined;
  if (previous !== undefined && !previous.ok) return fail({ exitCode: 1, message: previous.error });

  const config = withRenderNodeName(request.config, request.example ? current.objects : []);
  const warnings = [
    ...request.configWarnings,
    ...[...(previous?.warnings ?? []), ...current.warnings].map(formatSourceWarning),
  ];
  const stateOf = (objects: readonly KubeObject[]) => {
    const built = buildState(objects, config, request.families);
    warnings.push(...built.warnings);
    return built.state;
  };
  const previousState = previous && stateOf(previous.objects);
  const state = stateOf(current.objects);

  // Notes (kinds kproxy does not read, a dump's Pods) inform and do not fail --strict.
  const notes = new Set([...(previous?.notes ?? []), ...current.notes].map(formatSourceNote));
  for (const note of notes) io.stderr.write(`note: ${note}\n`);
  const uniqueWarnings = [...new Set(warnings)];
  for (const warning of uniqueWarnings) io.stderr.write(`warning: ${warning}\n`);
  if (request.strict && uniqueWarnings.length > 0) {
    return fail({
      exitCode: 1,
      message: `${uniqueWarnings.length} warning(s) and --strict: nothing rendered`,
    });
  }
  const planner = await plannerLoad;
  const chunkInputs = planner.chunkInputs?.bind(planner);
  if (request.chunks && chunkInputs === undefined) {
    return fail({ exitCode: 2, message: `--chunks: the ${planner.mode} dataplane does not split its input` });
  }
  const inputsOf = request.chunks && chunkInputs ? chunkInputs : planner.inputs.bind(planner);
  const format = request.script ? shellScript : printInputs;
  const print = (plan: unknown) => format(inputsOf(plan));
  // --since: in the rounds the sync step applies it in (render-rounds.ts).
  io.stdout.write(
    (request.script ? SCRIPT_PREAMBLE : '') +
      (previousState ? renderSince(planner, previousState, state, print) : print(planner.planFull(state))),
  );
  return 0;
}

/** The request render's flags make (also `kproxy diff`'s: the same objects, config and families). */
export async function renderRequest(values: FlagValues): Promise<RenderRequest | Failure> {
  const usage = (message: string): Failure => ({ exitCode: 2, message });
  const mode = values.mode ?? values['proxy-mode'];
  if (values['proxy-mode'] !== undefined && mode !== values['proxy-mode']) {
    return usage('--mode and --proxy-mode disagree');
  }
  const example = values.example === true;
  const inputs = [
    ...((values.input as string[] | undefined) ?? []),
    ...(example ? [EXAMPLE_CLUSTER_PATH] : []),
  ];
  // diff's --live-api lists the objects from the cluster instead (render has no such flag).
  const live = values['live-api'] === true;
  if (live && inputs.length > 0) return usage('--live-api reads the cluster: give no --input or --example');
  if (inputs.length === 0 && !live)
    return usage('no input: give --input PATH (repeatable, - for stdin) or --example');
  const families = FAMILY_FLAG[(values.family as string | undefined) ?? 'both'];
  if (families === undefined)
    return usage(`--family: ${JSON.stringify(values.family)} is not ipv4, ipv6 or both`);
  const loaded = await loadRenderConfig(values);
  if (!loaded.ok) return { exitCode: loaded.usage ? 2 : 1, message: loaded.error };
  return {
    inputs,
    since: (values.since as string[] | undefined) ?? [],
    example,
    strict: values.strict === true,
    chunks: values.chunks === true,
    script: values.script === true,
    families,
    config: loaded.config,
    configWarnings: loaded.warnings,
  };
}

/**
 * The configuration render shows, read as `kproxy run` reads these flags (with --config, the flags
 * bound to the file's fields are ignored), except render's own choices: --mode/--proxy-mode pick the
 * mode to render whatever the file says, and --example comes with its node's configuration (cluster
 * CIDR, node IPs), under the flags, unless --config is given. Trace reads the node's IPs from it too.
 */
export function loadRenderConfig(values: FlagValues): Promise<CommandLineConfigResult> {
  const { mode, 'proxy-mode': proxyMode, ...flags } = values;
  return loadCommandLineConfig(
    flags,
    { readFile: (path) => readFile(path, 'utf8'), hostname: hostname() },
    {
      defaultConfig: values.example === true ? EXAMPLE_CONFIG_PATH : undefined,
      mode: (mode ?? proxyMode) as string | undefined,
    },
  );
}

/**
 * The node to render for: --hostname-override/--node when given; else, with --example, the first
 * Node of the inputs (node-1 of the example: the machine's hostname would match no node there);
 * else the machine's hostname, as kube-proxy does.
 */
export function withRenderNodeName(config: ProxyConfig, exampleObjects: readonly KubeObject[]): ProxyConfig {
  if (config.hostnameOverride !== '') return config;
  const firstNode = groupObjects(exampleObjects).nodes[0];
  return firstNode ? { ...config, nodeName: firstNode.metadata.name } : config;
}

/** The state of the requested families for this node, and what the user should hear about. */
export function buildState(
  objects: readonly KubeObject[],
  config: ProxyConfig,
  families: readonly IPFamily[],
): { readonly state: DualStackState; readonly warnings: readonly string[] } {
  const { services, endpointSlices, nodes, serviceCIDRs } = groupObjects(objects);
  const node = nodes.find((candidate) => candidate.metadata.name === config.nodeName);
  const built = buildProxyState({ services, endpointSlices, node, serviceCIDRs }, toProxyOptions(config));
  const warnings = built.problems.map((problem) => `${problem.object}: ${problem.reason}`);
  if (node === undefined && config.nodeIPs.length === 0) {
    warnings.push(`no Node "${config.nodeName}" in the input and no --node-ip: this node's IPs are unknown`);
  }
  const state = Object.fromEntries(
    families.filter((family) => built.state[family]).map((family) => [family, built.state[family]]),
  );
  return { state, warnings };
}

function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => {
    loaded ??= load();
    return loaded;
  };
}
