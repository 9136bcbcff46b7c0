// `kproxy diff` for the nftables mode: kproxy's tables as the kernel holds them against the
// render of the same objects (compared as ../shared/drift/nft-tables.ts says), and the other
// owners' rules that change a Service's packets. The live side is read table by table: kproxy's
// as it streams, the others' (kilobytes) whole.
import { runInSlices } from '../../contract/base/work-slices.ts';
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { type DriftReader, type DriftReport, servicePortsOf } from '../shared/drift/drift-report.ts';
import { judgeNftForeign, nftLeftovers } from '../shared/drift/nft-foreign.ts';
import { compareWithRender } from '../shared/drift/nft-tables.ts';
import { type NftTransaction, TABLE } from '../shared/nft/transaction.ts';
import { indexRulesetSteps } from '../shared/trace/element-index.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';
import { traceNftables } from '../shared/trace/nft.ts';
import { readForeignTables } from '../shared/trace/nft-live.ts';
import { type NftRuleset, parseNftRuleset } from '../shared/trace/nft-ruleset.ts';
import type { TracePacket } from '../shared/trace/packet.ts';
import { createNftablesPlanner } from './planner.ts';
import { schedulerChoice } from './scheduler.ts';
import { indexedMaps } from './sets.ts';

export interface NftDriftInput {
  /** The render of these objects: a full plan's transactions. */
  readonly transactions: Iterable<NftTransaction | undefined>;
  readonly servicePorts: readonly ServicePort[];
  /** This node's addresses (traffic from the node itself is traced from one of them). */
  readonly localAddresses: readonly string[];
  /** The maps whose endpoints compare as a multiset per key (sets.ts). */
  readonly indexedMaps: ReadonlySet<string>;
}

/** The nftables drift report: kproxy's tables against the render, and foreign rules judged. */
export async function nftablesDrift(runner: CommandRunner, input: NftDriftInput): Promise<DriftReport> {
  const own = await compareWithRender(runner, { table: TABLE, ...input });
  const foreign = await readForeignTables(runner, TABLE);
  const others = parseNftRuleset(foreign.text);
  // kproxy's tables in full, parsed and indexed in slices, only when a foreign rule is to be traced
  // through them.
  const tracer = async () => {
    const live = await own.live();
    const combined: NftRuleset = {
      tables: new Map([...live.tables, ...others.tables]),
      unknown: [...live.unknown, ...others.unknown],
    };
    await runInSlices(indexRulesetSteps(combined));
    return (packet: TracePacket) =>
      traceNftables(combined, packet, {
        host: { localAddresses: input.localAddresses },
        foreignTables: true,
      });
  };
  return {
    mode: 'nftables',
    pieces: [...own.pieces, ...nftLeftovers(others, TABLE)],
    foreign: await judgeNftForeign(others, tracer, input.servicePorts, input.localAddresses),
    unreadable: [...own.unreadable, ...foreign.unreadable],
  };
}

/** The nftables mode's reader: planFull's transactions for each state (ipvs.scheduler's) against the kernel. */
export function nftablesDriftReader(runner: CommandRunner, scheduler: string | undefined): DriftReader {
  const planner = createNftablesPlanner({ scheduler });
  const indexed = indexedMaps(schedulerChoice(scheduler).endpointHash);
  return async (state) =>
    nftablesDrift(runner, {
      transactions: planner.planFull(state).transactions(),
      servicePorts: servicePortsOf(state),
      localAddresses: await readLocalAddresses(runner),
      indexedMaps: indexed,
    });
}
