// The IPVS tracer: the virtual servers (`ipvsadm -Sn` lines), the addresses bound to the dummy
// link, and the companion nft table (through the nftables tracer). IPVS itself acts at input
// (packets from elsewhere) and output (the node's own), right after the companion's chains.

import { type Flow, withStep } from '../shared/trace/flow.ts';
import { dnatTo, parseHostPort, traceNftables } from '../shared/trace/nft.ts';
import { type NftRuleset, parseNftRuleset } from '../shared/trace/nft-ruleset.ts';
import type { TraceReport } from '../shared/trace/outcome.ts';
import { hostPort, type TraceHost, type TracePacket } from '../shared/trace/packet.ts';

export interface IpvsRealServer {
  readonly address: string;
  readonly port: number;
  readonly weight: number;
  readonly line: string;
}

export interface IpvsVirtualServer {
  readonly protocol: 'tcp' | 'udp' | 'sctp';
  readonly address: string;
  readonly port: number;
  readonly scheduler: string;
  /** Persistence timeout in seconds (`-p`): not kproxy's (its affinity is the companion's). */
  readonly persistence?: number;
  readonly line: string;
  readonly realServers: IpvsRealServer[];
}

export interface IpvsRuleset {
  readonly boundAddresses: readonly string[];
  /** Keyed "protocol address port" (canonical address). */
  readonly virtualServers: Map<string, IpvsVirtualServer>;
  /** The companion table (its nft text parsed, or the tests' fake nft's state). */
  readonly companion: NftRuleset;
  readonly unknown: readonly string[];
}

const PROTOCOL_FLAGS: Readonly<Record<string, 'tcp' | 'udp' | 'sctp'>> = {
  '-t': 'tcp',
  '--tcp-service': 'tcp',
  '-u': 'udp',
  '--udp-service': 'udp',
  '--sctp-service': 'sctp',
};

/** IPVS hooks: NF_IP_PRI_NAT_SRC - 1 at input, NF_IP_PRI_NAT_DST + 2 at output. */
const IPVS_INPUT_PRIORITY = 99;
const IPVS_OUTPUT_PRIORITY = -98;

/**
 * Reads `render --mode ipvs` output (or the same sections read back from the kernel): lines
 * under "# Addresses", "# IPVS virtual servers" and "# nftables companion table" headers.
 */
export function parseIpvsRuleset(text: string): IpvsRuleset {
  const bound: string[] = [];
  const virtualServers = new Map<string, IpvsVirtualServer>();
  const companion: string[] = [];
  const unknown: string[] = [];
  let section: 'addresses' | 'ipvs' | 'nft' | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('# ')) {
      if (/^# Addresses/.test(line)) section = 'addresses';
      else if (/^# IPVS/.test(line)) section = 'ipvs';
      else if (/^# nftables/.test(line)) section = 'nft';
      continue;
    }
    if (section === 'nft') companion.push(line);
    else if (section === 'addresses') {
      const address = line.match(/^address add (\S+?)(?:\/\d+)? dev /)?.[1];
      if (address) bound.push(address);
    } else if (section === 'ipvs' && line.trim() !== '') {
      if (!addVirtualServerLine(virtualServers, line)) unknown.push(line);
    }
  }
  return { boundAddresses: bound, virtualServers, companion: parseNftRuleset(companion.join('\n')), unknown };
}

function addVirtualServerLine(servers: Map<string, IpvsVirtualServer>, line: string): boolean {
  const words = line.trim().split(/\s+/);
  const [command, protocolFlag, service] = words;
  const protocol = PROTOCOL_FLAGS[protocolFlag ?? ''];
  if (protocol === undefined || service === undefined) return false;
  const { address, port } = parseHostPort(service, 0);
  const key = `${protocol} ${address} ${port}`;
  const option = (flag: string) => {
    const at = words.indexOf(flag);
    return at < 0 ? undefined : words[at + 1];
  };
  if (command === '-A') {
    const persistence = option('-p');
    servers.set(key, {
      protocol,
      address,
      port,
      scheduler: option('-s') ?? 'wlc',
      ...(persistence !== undefined && { persistence: Number(persistence) }),
      line,
      realServers: [],
    });
    return true;
  }
  if (command === '-a') {
    const real = option('-r');
    const server = servers.get(key);
    if (real === undefined || server === undefined) return false;
    const target = parseHostPort(real, port);
    server.realServers.push({ ...target, weight: Number(option('-w') ?? 1), line });
    return true;
  }
  return false;
}

/** `foreignTables`: the companion ruleset holds other owners' tables too, and they are evaluated. */
export function traceIpvs(
  ruleset: IpvsRuleset,
  packet: TracePacket,
  host: TraceHost,
  options: { readonly foreignTables?: boolean } = {},
): TraceReport {
  const withBound: TraceHost = { localAddresses: [...host.localAddresses, ...ruleset.boundAddresses] };
  const run = (hook: 'input' | 'output') => (flow: Flow) => ipvsLookup(ruleset, hook, flow);
  const report = traceNftables(
    ruleset.companion,
    packet,
    {
      host: withBound,
      ...options,
      extraHooks: [
        { hook: 'input', priority: IPVS_INPUT_PRIORITY, run: run('input') },
        { hook: 'output', priority: IPVS_OUTPUT_PRIORITY, run: run('output') },
      ],
    },
    'ipvs',
  );
  return {
    ...report,
    notEvaluated: [...ruleset.unknown.map((line) => `not understood: ${line}`), ...report.notEvaluated],
  };
}

/** What IPVS does with a new connection: the real server, chosen by weight (one share each for rr). */
function ipvsLookup(ruleset: IpvsRuleset, hook: 'input' | 'output', flow: Flow): Flow[] {
  if (flow.dnat !== undefined) return [flow];
  const server = ruleset.virtualServers.get(`${flow.protocol} ${flow.destination} ${flow.port}`);
  if (server === undefined) return [flow];
  const service = `${hostPort(server.address, server.port)}/${server.protocol.toUpperCase()}`;
  const step = (text: string, note?: string) =>
    withStep(flow, { hook, table: 'ipvs', chain: service, kind: 'ipvs', text, ...(note && { note }) });
  const weighted = server.realServers.filter((real) => real.weight > 0);
  // A virtual server without real servers answers ICMP port unreachable (ip_vs_leave).
  if (weighted.length === 0) {
    const rule = `ipvs ${server.line}: no real server`;
    return [{ ...step(server.line, 'no real server'), verdict: { kind: 'reject', rule } }];
  }
  const roundRobin = server.scheduler === 'rr';
  const total = weighted.reduce((sum, real) => sum + (roundRobin ? 1 : real.weight), 0);
  const affinity =
    server.persistence === undefined
      ? undefined
      : // kproxy's virtual servers are never persistent (affinity.ts); another's may be (kube-proxy's).
        `ClientIP affinity: IPVS persistence keeps ${flow.source} on its real server for at least ${server.persistence}s: as long as it has a connection (TIME_WAIT included), plus up to 60s (kubernetes#89358)`;
  const entered = step(server.line, `scheduler ${server.scheduler}`);
  return weighted.map((real) => {
    const share = (roundRobin ? 1 : real.weight) / total;
    const chosen = withStep(
      { ...entered, probability: entered.probability * share },
      { hook, table: 'ipvs', chain: service, kind: 'ipvs', text: real.line },
    );
    return { ...dnatTo(chosen, real), ...(affinity && { affinity }) };
  });
}
