// `kproxy diff` for the IPVS mode: what the kernel holds, read as `trace --live` reads it
// (trace-live.ts: the dummy link's addresses, `ipvsadm -Sn`, the companion tables), against the
// full plan of the same objects: each virtual server with its scheduler and persistence, each real
// server with its weight, each address of kproxy-ipvs0, and the companion table compared as the
// nftables mode's (../shared/drift/nft-tables.ts); other kproxy modes' leftovers are extra, and
// other owners' hook rules are judged by the IPVS tracer (../shared/drift/nft-foreign.ts).
//
// A real server the plan does not hold at weight 0 is draining (live.ts keeps it until its
// connections end), not drift, when the running dataplane's record says it drains it; without one
// (`kproxy diff`, another process), any such server is taken for draining: the kernel holds nothing
// that tells kproxy's from one someone added at weight 0.
import { runInSlices } from '../../contract/base/work-slices.ts';
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import {
  type DriftPiece,
  type DriftReader,
  type DriftReport,
  NODE_WIDE,
  serviceOfText,
  servicePortsOf,
} from '../shared/drift/drift-report.ts';
import { judgeNftForeign, nftLeftovers } from '../shared/drift/nft-foreign.ts';
import { compareTable, listRendered } from '../shared/drift/nft-tables.ts';
import { FAMILIES } from '../shared/nft/ruleset.ts';
import { indexRulesetSteps } from '../shared/trace/element-index.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';
import { readForeignTables } from '../shared/trace/nft-live.ts';
import { parseNftRuleset } from '../shared/trace/nft-ruleset.ts';
import type { TracePacket } from '../shared/trace/packet.ts';
import { COMPANION_TABLE } from './companion-ruleset.ts';
import { DUMMY_LINK, type IpvsDesired, type IpvsPlan } from './ipvs-plan.ts';
import { ipvsadmLine } from './ipvs-render.ts';
import { createIpvsPlanner } from './planner.ts';
import { type IpvsVirtualServer, parseIpvsRuleset, traceIpvs } from './trace.ts';
import { readLiveIpvsRules } from './trace-live.ts';
import { hostPort, type RealServer, type VirtualServer } from './virtual-servers.ts';

/** How `ipvsadm -Sn` keys a virtual server (trace.ts). */
function listedKey(vs: Pick<VirtualServer, 'protocol' | 'address' | 'port'>): string {
  return `${vs.protocol.toLowerCase()} ${vs.address} ${vs.port}`;
}

/** Whether the running dataplane drains `server` of `service` (live.ts drains()). */
export type DrainingCheck = (
  service: Pick<VirtualServer, 'protocol' | 'address' | 'port'>,
  server: Pick<RealServer, 'address' | 'port'>,
) => boolean;

/** The virtual servers and their real servers, want against have. */
export function compareVirtualServers(
  desired: IpvsDesired,
  live: ReadonlyMap<string, IpvsVirtualServer>,
  servicePorts: readonly ServicePort[],
  drains: DrainingCheck = () => true,
): DriftPiece[] {
  const pieces: DriftPiece[] = [];
  const held = new Map(live);
  for (const vs of desired.virtualServers.values()) {
    const where = `ipvs virtual server ${vs.protocol} ${hostPort(vs.address, vs.port)}`;
    const piece = (kind: DriftPiece['kind'], text: string, expected?: string) =>
      pieces.push({
        kind,
        service: vs.servicePort,
        where,
        text,
        ...(expected !== undefined && { expected }),
      });
    const found = held.get(listedKey(vs));
    held.delete(listedKey(vs));
    const line = ipvsadmLine({ op: 'add-service', service: vs });
    if (found === undefined) {
      piece('missing', line);
      continue;
    }
    if (found.scheduler !== vs.scheduler || (found.persistence ?? 0) !== vs.persistenceTimeout)
      piece('different', found.line.trim(), line);
    const servers = new Map(found.realServers.map((rs) => [hostPort(rs.address, rs.port), rs]));
    for (const rs of vs.realServers) {
      const key = hostPort(rs.address, rs.port);
      const have = servers.get(key);
      servers.delete(key);
      const want = ipvsadmLine({ op: 'add-server', service: vs, server: rs });
      if (have === undefined) piece('missing', want);
      else if (have.weight !== rs.weight) piece('different', have.line.trim(), want);
    }
    for (const rs of servers.values()) if (rs.weight !== 0 || !drains(vs, rs)) piece('extra', rs.line.trim());
  }
  for (const vs of held.values()) {
    const service = serviceOfText(`${vs.address} ${vs.port}`, servicePorts, vs.protocol);
    const where = `ipvs virtual server ${vs.protocol.toUpperCase()} ${hostPort(vs.address, vs.port)}`;
    pieces.push({ kind: 'extra', service, where, text: vs.line.trim() });
  }
  return pieces;
}

/** The dummy link's addresses: each the Service port's whose address it is, when only one's. */
function compareAddresses(
  desired: readonly string[],
  live: readonly string[],
  servicePorts: readonly ServicePort[],
): DriftPiece[] {
  const serviceOf = (address: string) => {
    const owners = servicePorts.filter((sp) =>
      [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].includes(address),
    );
    return owners.length === 1 ? owners[0]!.key : NODE_WIDE;
  };
  const want = new Set(desired);
  const have = new Set(live);
  const where = `link ${DUMMY_LINK}`;
  return [
    ...desired.filter((a) => !have.has(a)).map((a) => ({ kind: 'missing' as const, a })),
    ...live.filter((a) => !want.has(a)).map((a) => ({ kind: 'extra' as const, a })),
  ].map(({ kind, a }) => ({ kind, service: serviceOf(a), where, text: `address ${a}` }));
}

export interface IpvsDriftInput {
  /** The full plan of these objects. */
  readonly plan: Extract<IpvsPlan, { kind: 'full' }>;
  readonly servicePorts: readonly ServicePort[];
  /** This node's addresses (traffic from the node itself is traced from one of them). */
  readonly localAddresses: readonly string[];
  /** The running dataplane's draining record; absent: every weight-0 server the plan lacks drains. */
  readonly drains?: DrainingCheck;
}

/** The IPVS drift report: virtual servers, real servers, the link's addresses, the companion table. */
export async function ipvsDrift(runner: CommandRunner, input: IpvsDriftInput): Promise<DriftReport> {
  const desiredCompanion = await listRendered(runner, [input.plan.nft]);
  const live = parseIpvsRuleset(await readLiveIpvsRules(runner));
  const foreign = await readForeignTables(runner, COMPANION_TABLE);
  const others = parseNftRuleset(foreign.text);
  const pieces = [
    ...compareAddresses(input.plan.desired.boundAddresses, live.boundAddresses, input.servicePorts),
    ...compareVirtualServers(input.plan.desired, live.virtualServers, input.servicePorts, input.drains),
    ...FAMILIES.flatMap((family) =>
      compareTable(
        `${family} ${COMPANION_TABLE}`,
        desiredCompanion.get(family),
        live.companion.tables.get(`${family} ${COMPANION_TABLE}`),
        input.servicePorts,
      ),
    ),
    ...nftLeftovers(others, COMPANION_TABLE),
  ];
  const { localAddresses } = input;
  // IPVS and its companion with the other owners' tables, as packets meet them, indexed in slices.
  const tracer = async () => {
    const combined = {
      ...live,
      companion: { ...live.companion, tables: new Map([...live.companion.tables, ...others.tables]) },
    };
    await runInSlices(indexRulesetSteps(combined.companion));
    return (packet: TracePacket) => traceIpvs(combined, packet, { localAddresses }, { foreignTables: true });
  };
  return {
    mode: 'ipvs',
    pieces,
    foreign: await judgeNftForeign(others, tracer, input.servicePorts, localAddresses),
    unreadable: foreign.unreadable,
  };
}

/** The IPVS mode's reader: planFull of each state (ipvs.scheduler) against the kernel. */
export function ipvsDriftReader(
  runner: CommandRunner,
  scheduler: string,
  drains?: DrainingCheck,
): DriftReader {
  const planner = createIpvsPlanner({ scheduler });
  return async (state) => {
    const plan = planner.planFull(state);
    if (plan.kind !== 'full') throw new Error('the IPVS planner made no full plan');
    return ipvsDrift(runner, {
      plan,
      servicePorts: servicePortsOf(state),
      localAddresses: await readLocalAddresses(runner),
      ...(drains && { drains }),
    });
  };
}
