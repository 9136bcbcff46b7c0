// `kproxy trace`: one packet through kproxy's rules (rendered from cluster objects, or read back
// from this node's kernel with --live): the hooks and chains it meets, the rules and map
// elements that match (with their Service port), and where it ends.
import type { ParseArgsOptionsConfig } from 'node:util';
import { canonicalIP } from '../../contract/base/ip-address.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import { traceIptables } from '../../dataplanes/iptables/trace.ts';
import { readLiveIptablesRules } from '../../dataplanes/iptables/trace-live.ts';
import { parseIptablesRuleset } from '../../dataplanes/iptables/trace-ruleset.ts';
import { parseIpvsRuleset, traceIpvs } from '../../dataplanes/ipvs/trace.ts';
import { readLiveIpvsRules } from '../../dataplanes/ipvs/trace-live.ts';
import { readLiveNftRuleset } from '../../dataplanes/nftables/trace-live.ts';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { readLocalAddresses } from '../../dataplanes/shared/trace/live-host.ts';
import { traceNftables } from '../../dataplanes/shared/trace/nft.ts';
import { parseNftRuleset } from '../../dataplanes/shared/trace/nft-ruleset.ts';
import type { TraceReport } from '../../dataplanes/shared/trace/outcome.ts';
import type {
  TraceHost,
  TracePacket,
  TraceProtocol,
  TraceVia,
} from '../../dataplanes/shared/trace/packet.ts';
import { isLocalAddress } from '../../dataplanes/shared/trace/packet.ts';
import { reportJson, reportText } from '../../dataplanes/shared/trace/report.ts';
import type { FlagValues } from '../config/proxy-flags.ts';
import { PROXY_FLAG_OPTIONS } from '../config/proxy-flags.ts';
import { toProxyOptions } from '../config/proxy-options.ts';
import { nodeSettingsByFamily } from '../model/node-settings.ts';
import { groupObjects } from '../sources/cluster-objects.ts';
import { EXAMPLE_CLUSTER_PATH } from '../sources/example-cluster.ts';
import { readObjects } from '../sources/read-objects.ts';
import { commandFlags, usageError } from './command-flags.ts';
import { TRACE_USAGE } from './help.ts';
import { type CliIO, readAllText } from './io.ts';
import { loadRenderConfig, renderCommand } from './render.ts';

export type TraceMode = 'nftables' | 'iptables' | 'ipvs';

/** Flags trace reads itself; every other flag goes to `render` as given. */
const TRACE_ONLY_OPTIONS: ParseArgsOptionsConfig = {
  from: { type: 'string' },
  to: { type: 'string' },
  via: { type: 'string' },
  json: { type: 'boolean' },
  live: { type: 'boolean' },
  local: { type: 'string', multiple: true },
};

const TRACE_OPTIONS: ParseArgsOptionsConfig = {
  ...PROXY_FLAG_OPTIONS,
  ...TRACE_ONLY_OPTIONS,
  mode: { type: 'string' },
  input: { type: 'string', multiple: true },
  example: { type: 'boolean' },
  strict: { type: 'boolean' },
  family: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

const MODES: readonly TraceMode[] = ['nftables', 'iptables', 'ipvs'];
const VIAS: readonly TraceVia[] = ['pod', 'node', 'external'];
const PROTOCOLS: readonly TraceProtocol[] = ['tcp', 'udp', 'sctp'];
/** The source port of the traced packet when --from gives none: any ephemeral port. */
const DEFAULT_SOURCE_PORT = 40000;

/** Traces `packet` through rule text of `mode` (as `render` prints it, or read back from the kernel). */
export function traceRuleText(
  mode: TraceMode,
  text: string,
  packet: TracePacket,
  host: TraceHost,
): TraceReport {
  return ruleTracer(mode, text, host)(packet);
}

/**
 * traceRuleText for many packets through the same rules: the text is parsed once (a kernel test
 * traces hundreds of flows through one ruleset; parsing it again for each was most of its CPU).
 */
export function ruleTracer(
  mode: TraceMode,
  text: string,
  host: TraceHost,
): (packet: TracePacket) => TraceReport {
  if (mode === 'iptables') {
    const ruleset = parseIptablesRuleset(text);
    return (packet) => traceIptables(ruleset, packet, host);
  }
  if (mode === 'ipvs') {
    const ruleset = parseIpvsRuleset(text);
    return (packet) => traceIpvs(ruleset, packet, host);
  }
  const ruleset = parseNftRuleset(text);
  return (packet) => traceNftables(ruleset, packet, { host });
}

/** Reads what the kernel holds for `mode`, in the text form traceRuleText reads. */
export function readLiveRules(
  mode: TraceMode,
  runner: CommandRunner,
  onUnreadable?: (reason: string) => void,
): Promise<string> {
  if (mode === 'iptables') return readLiveIptablesRules(runner);
  if (mode === 'ipvs') return readLiveIpvsRules(runner);
  return readLiveNftRuleset(runner, onUnreadable);
}

export interface TraceDependencies {
  /** Runs nft, iptables-save, ipvsadm and ip for --live. */
  readonly runner?: CommandRunner;
}

export async function traceCommand(
  args: readonly string[],
  io: CliIO,
  dependencies: TraceDependencies = {},
): Promise<number> {
  const flags = commandFlags(io, 'trace', args, TRACE_OPTIONS, TRACE_USAGE);
  if (typeof flags === 'number') return flags;
  const usage = (message: string) => usageError(io, 'trace', message);
  const mode = (flags.mode ?? flags['proxy-mode'] ?? 'nftables') as TraceMode;
  if (!MODES.includes(mode))
    return usage(`--mode: ${JSON.stringify(mode)} is not nftables, iptables or ipvs`);
  const live = flags.live === true;
  const rendered = flags.example === true || flags.input !== undefined;
  if (live === rendered) return usage('give either --live, or --input PATH... / --example');
  const from = parseAddress(flags.from as string | undefined, false);
  if (typeof from === 'string') return usage(`--from: ${from}`);
  const to = parseAddress(flags.to as string | undefined, true);
  if (typeof to === 'string') return usage(`--to: ${to}`);
  if (from.address.includes(':') !== to.address.includes(':'))
    return usage('--from and --to are of different IP families');
  const via = flags.via as TraceVia | undefined;
  if (via !== undefined && !VIAS.includes(via))
    return usage(`--via: ${JSON.stringify(via)} is not pod, node or external`);

  // Render and the node lookup both read the inputs: stdin (`--input -`) is read once for both.
  const stdinText = args.includes('-') ? await readAllText(io.stdin) : '';
  const replay = (): CliIO => ({
    ...io,
    stdin: (async function* () {
      yield stdinText;
    })(),
  });
  let text: string;
  let localAddresses: string[];
  try {
    if (live) {
      const runner = dependencies.runner ?? execaRunner();
      text = await readLiveRules(mode, runner, (reason) => io.stderr.write(`warning: not read: ${reason}\n`));
      localAddresses = await readLocalAddresses(runner);
    } else {
      const output = await renderedRules(args, replay(), mode);
      if (typeof output === 'number') return output;
      text = output;
      localAddresses = await configuredNodeIPs(flags, replay());
    }
  } catch (error) {
    if (!(error instanceof DataplaneError)) throw error;
    io.stderr.write(`kproxy trace: ${error.message}\n`);
    return 1;
  }
  localAddresses.push(...((flags.local as string[] | undefined) ?? []));
  if (localAddresses.length === 0)
    io.stderr.write(
      'warning: this node\'s addresses are unknown (give --node-ip or --local): node ports and "local" checks will not match\n',
    );
  const host: TraceHost = { localAddresses };
  const packet: TracePacket = {
    source: from.address,
    sourcePort: from.port ?? DEFAULT_SOURCE_PORT,
    destination: to.address,
    port: to.port!,
    protocol: to.protocol,
    via: via ?? (isLocalAddress(host, from.address) ? 'node' : 'external'),
  };
  const report = traceRuleText(mode, text, packet, host);
  io.stdout.write(flags.json === true ? reportJson(report) : reportText(report));
  return 0;
}

/** The rules `kproxy render` prints for the same flags (the trace's own flags left out). */
async function renderedRules(args: readonly string[], io: CliIO, mode: TraceMode): Promise<string | number> {
  let stdout = '';
  const renderArgs = withoutTraceFlags(args);
  if (!args.some((arg) => arg === '--mode' || arg.startsWith('--mode=') || arg.startsWith('--proxy-mode')))
    renderArgs.push('--mode', mode);
  const code = await renderCommand(renderArgs, {
    ...io,
    stdout: { write: (chunk: string) => (stdout += chunk) },
  });
  return code === 0 ? stdout : code;
}

function withoutTraceFlags(args: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i]!.match(/^--([^=]+)(=.*)?$/);
    const option = name ? TRACE_ONLY_OPTIONS[name[1]!] : undefined;
    if (option === undefined) kept.push(args[i]!);
    else if (option.type === 'string' && name![2] === undefined) i++;
  }
  return kept;
}

/**
 * The node IPs render used: --node-ip or the configuration's, else the Node object's (the node
 * render renders for: --node, or with --example its first Node), as the model takes them.
 */
async function configuredNodeIPs(flags: FlagValues, io: CliIO): Promise<string[]> {
  const example = flags.example === true;
  const loaded = await loadRenderConfig(flags);
  if (!loaded.ok) return [];
  const inputs = [
    ...((flags.input as string[] | undefined) ?? []),
    ...(example ? [EXAMPLE_CLUSTER_PATH] : []),
  ];
  const read = await readObjects(inputs, () => readAllText(io.stdin));
  const { nodes } = groupObjects(read.ok ? read.objects : []);
  const named =
    loaded.config.hostnameOverride === '' && example ? nodes[0]?.metadata.name : loaded.config.nodeName;
  const node = nodes.find((candidate) => candidate.metadata.name === named);
  const byFamily = nodeSettingsByFamily(toProxyOptions(loaded.config), node, []);
  return [...(byFamily.IPv4?.nodeIPs ?? []), ...(byFamily.IPv6?.nodeIPs ?? [])];
}

/** "10.0.0.1", "10.0.0.1:80", "[fd00::1]:80", "fd00::1", with "/tcp" etc. after the port for --to. */
function parseAddress(
  text: string | undefined,
  destination: boolean,
): { address: string; port?: number; protocol: TraceProtocol } | string {
  if (text === undefined) return 'missing';
  const [hostAndPort, protocolText = 'tcp'] = text.split('/');
  const protocol = protocolText.toLowerCase() as TraceProtocol;
  if (!PROTOCOLS.includes(protocol)) return `${JSON.stringify(protocolText)} is not tcp, udp or sctp`;
  const match =
    hostAndPort!.match(/^\[([^\]]+)\](?::(\d+))?$/) ??
    hostAndPort!.match(/^([^:]+)(?::(\d+))?$/) ??
    hostAndPort!.match(/^([0-9a-f:]+)()$/i);
  const address = canonicalIP(match?.[1] ?? '');
  if (address === undefined) return `${JSON.stringify(text)} is not ADDRESS[:PORT]`;
  const port = match?.[2] ? Number(match[2]) : undefined;
  if (port !== undefined && (port < 1 || port > 65535)) return `port ${port} is out of range`;
  if (destination && port === undefined)
    return `${JSON.stringify(text)} has no port (ADDRESS:PORT[/PROTOCOL])`;
  return { address, protocol, ...(port !== undefined && { port }) };
}
