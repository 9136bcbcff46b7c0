// `kproxy render`: cluster objects from files → the dataplane's ruleset on stdout (a dry run that
// touches nothing), or with --since the incremental transaction from an older snapshot.
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import type { ParseArgsOptionsConfig } from 'node:util';
import type { DataplaneMode } from '../../dataplanes/shared/dataplane.ts';
import { buildProxyState } from '../model/build-state.ts';
import type { DualStackState } from '../model/proxy-state.ts';
import { groupObjects } from '../sources/cluster-objects.ts';
import { EXAMPLE_CLUSTER_PATH } from '../sources/example-cluster.ts';
import { formatSourceWarning, readObjects } from '../sources/read-objects.ts';
import { loadProxyConfig, type ProxyConfig } from './config.ts';
import { RENDER_USAGE } from './help.ts';
import { type CliIO, readAllText } from './io.ts';
import { parseFlags } from './parse-flags.ts';
import { loadPlanner } from './planners.ts';
import { PROXY_FLAG_OPTIONS } from './proxy-flags.ts';
import { toProxyOptions } from './proxy-options.ts';

const RENDER_OPTIONS: ParseArgsOptionsConfig = {
  ...PROXY_FLAG_OPTIONS,
  mode: { type: 'string' },
  input: { type: 'string', multiple: true },
  example: { type: 'boolean' },
  since: { type: 'string', multiple: true },
  strict: { type: 'boolean' },
  family: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

const FAMILIES: Readonly<Record<string, readonly (keyof DualStackState)[]>> = {
  ipv4: ['IPv4'],
  ipv6: ['IPv6'],
  both: ['IPv4', 'IPv6'],
};

export async function renderCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage = (message: string) => {
    io.stderr.write(`kproxy render: ${message}\n(see kproxy render --help)\n`);
    return 2;
  };
  const error = (message: string) => {
    io.stderr.write(`kproxy render: ${message}\n`);
    return 1;
  };
  const flags = parseFlags(args, RENDER_OPTIONS);
  if (!flags.ok) return usage(flags.error);
  const { values } = flags;
  if (values.help) {
    io.stdout.write(RENDER_USAGE);
    return 0;
  }
  if (
    values.mode !== undefined &&
    values['proxy-mode'] !== undefined &&
    values.mode !== values['proxy-mode']
  ) {
    return usage('--mode and --proxy-mode disagree');
  }
  const inputs = [...((values.input as string[] | undefined) ?? [])];
  if (values.example) inputs.push(EXAMPLE_CLUSTER_PATH);
  if (inputs.length === 0) return usage('no input: give --input PATH (repeatable, - for stdin) or --example');
  const family = FAMILIES[(values.family as string | undefined) ?? 'both'];
  if (family === undefined)
    return usage(`--family: ${JSON.stringify(values.family)} is not ipv4, ipv6 or both`);

  const loaded = await loadProxyConfig(
    { ...values, 'proxy-mode': values.mode ?? values['proxy-mode'] },
    { readFile: (path) => readFile(path, 'utf8'), hostname: hostname() },
  );
  if (!loaded.ok) return loaded.usage ? usage(loaded.error) : error(loaded.error);
  const plannerLoad = loadPlanner(loaded.config.mode as DataplaneMode);
  if (plannerLoad === undefined) return error(`mode ${loaded.config.mode} cannot render yet`);

  const stdinText = once(() => readAllText(io.stdin));
  const current = await readObjects(inputs, stdinText);
  if (!current.ok) return error(current.error);
  const sincePaths = (values.since as string[] | undefined) ?? [];
  const previous = sincePaths.length > 0 ? await readObjects(sincePaths, stdinText) : undefined;
  if (previous !== undefined && !previous.ok) return error(previous.error);

  const config = withRenderNodeName(loaded.config, values.example === true ? current.objects : []);
  const warnings = [...(previous?.warnings ?? []), ...current.warnings].map(formatSourceWarning);
  const stateOf = (objects: Parameters<typeof groupObjects>[0]) => {
    const { services, endpointSlices, nodes } = groupObjects(objects);
    const node = nodes.find((candidate) => candidate.metadata.name === config.nodeName);
    const built = buildProxyState({ services, endpointSlices, node }, toProxyOptions(config));
    warnings.push(...built.problems.map((problem) => `${problem.object}: ${problem.reason}`));
    return onlyFamilies(built.state, family);
  };
  const previousState = previous && stateOf(previous.objects);
  const state = stateOf(current.objects);

  const uniqueWarnings = [...new Set(warnings)];
  for (const warning of uniqueWarnings) io.stderr.write(`warning: ${warning}\n`);
  if (values.strict && uniqueWarnings.length > 0) {
    return error(`${uniqueWarnings.length} warning(s) and --strict: nothing rendered`);
  }
  const planner = await plannerLoad;
  const plan = previousState ? planner.planIncremental(previousState, state) : planner.planFull(state);
  io.stdout.write(planner.render(plan));
  return 0;
}

/**
 * The node to render for: --hostname-override/--node when given; else, with --example, the first
 * Node of the inputs (node-1 of the example: the machine's hostname would match no node there);
 * else the machine's hostname, as kube-proxy does.
 */
function withRenderNodeName(
  config: ProxyConfig,
  exampleObjects: Parameters<typeof groupObjects>[0],
): ProxyConfig {
  if (config.hostnameOverride !== '') return config;
  const firstNode = groupObjects(exampleObjects).nodes[0];
  return firstNode ? { ...config, nodeName: firstNode.metadata.name } : config;
}

function onlyFamilies(state: DualStackState, families: readonly (keyof DualStackState)[]): DualStackState {
  return Object.fromEntries(
    families.filter((family) => state[family]).map((family) => [family, state[family]]),
  );
}

function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => {
    loaded ??= load();
    return loaded;
  };
}
