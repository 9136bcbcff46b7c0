// `kproxy diff` for the nftables mode: kproxy's tables as the kernel holds them against the
// render of the same objects (compared as ../shared/drift/nft-tables.ts says), and the other
// owners' rules that change a Service's packets. The live side is read table by table
// (trace-live.ts).
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import {
  type DriftPiece,
  type DriftReader,
  type DriftReport,
  type ForeignRule,
  judged,
  NODE_WIDE,
  servicePortsOf,
} from '../shared/drift/drift-report.ts';
import { foreignHits } from '../shared/drift/foreign-hits.ts';
import { compareTable, listRendered } from '../shared/drift/nft-tables.ts';
import { FAMILIES } from '../shared/nft/ruleset.ts';
import { TABLE } from '../shared/nft/transaction.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';
import { KPROXY_TABLES, traceNftables } from '../shared/trace/nft.ts';
import { type NftRuleset, type NftTable, parseNftRuleset } from '../shared/trace/nft-ruleset.ts';
import { createNftablesPlanner } from './planner.ts';
import { INDEXED_MAPS } from './sets.ts';
import { readForeignTables, readLiveKproxyTables } from './trace-live.ts';

/**
 * Another kproxy mode's objects, as nft lists them: the IPVS mode's companion table
 * (dataplanes/ipvs/companion-ruleset.ts COMPANION_TABLE) and the iptables mode's KPROXY- chains
 * and the jumps to them (dataplanes/iptables/chain-names.ts), in iptables-nft's tables.
 */
const IPVS_COMPANION_TABLE = 'kproxy-ipvs';
const IPTABLES_CHAIN = /\bKPROXY-/;

function isLeftover(table: NftTable, chain: string, rule?: string): boolean {
  return table.name === IPVS_COMPANION_TABLE || IPTABLES_CHAIN.test(chain) || IPTABLES_CHAIN.test(rule ?? '');
}

/** Other kproxy modes' leftovers: extra, whoever they served (`kproxy cleanup` removes them). */
function leftovers(foreign: NftRuleset): DriftPiece[] {
  const pieces: DriftPiece[] = [];
  const extra = (where: string, text: string) =>
    pieces.push({ kind: 'extra', service: NODE_WIDE, where, text });
  for (const table of foreign.tables.values()) {
    const where = `${table.family} ${table.name}`;
    if (table.name === IPVS_COMPANION_TABLE) {
      extra(where, `table ${where}: the ipvs mode's leftover`);
      continue;
    }
    for (const chain of table.chains.values()) {
      if (IPTABLES_CHAIN.test(chain.name))
        extra(`${where} chain ${chain.name}`, `the iptables mode's leftover chain`);
      else
        for (const rule of chain.rules)
          if (IPTABLES_CHAIN.test(rule.text))
            extra(`${where} chain ${chain.name}`, `${rule.text} (the iptables mode's leftover)`);
    }
  }
  return pieces;
}

/**
 * The foreign rules on hooks, each with the Service ports whose packets it drops or rejects: every
 * ClusterIP, external and LoadBalancer address of each port traced from outside and from the node
 * through kproxy's live tables and the foreign ones together.
 */
function judgeForeign(
  liveText: string,
  foreignText: string,
  foreign: NftRuleset,
  servicePorts: readonly ServicePort[],
  localAddresses: readonly string[],
): ForeignRule[] {
  const rules = new Map<string, { where: string; text: string }>();
  for (const table of foreign.tables.values())
    for (const chain of table.chains.values()) {
      if (!chain.hook) continue;
      for (const rule of chain.rules) {
        if (isLeftover(table, chain.name, rule.text)) continue;
        const where = `${table.family} ${table.name} chain ${chain.name} (${chain.hook.hook})`;
        rules.set(`${where}\n${rule.text}`, { where, text: rule.text });
      }
    }
  if (rules.size === 0) return [];
  const combined = parseNftRuleset(`${liveText}\n${foreignText}`);
  const hits = foreignHits(
    servicePorts,
    localAddresses,
    (packet) => traceNftables(combined, packet, { host: { localAddresses }, foreignTables: true }),
    (step) => !KPROXY_TABLES.has(step.table.split(' ')[1] ?? ''),
    (step) => `${step.table} chain ${step.chain} (${step.hook})\n${step.text}`,
  );
  return judged(rules, hits);
}

export interface NftDriftInput {
  /** The render's `nft -f` script for these objects. */
  readonly script: string;
  readonly servicePorts: readonly ServicePort[];
  /** This node's addresses (traffic from the node itself is traced from one of them). */
  readonly localAddresses: readonly string[];
}

/** The nftables drift report: kproxy's tables against the render, and foreign rules judged. */
export async function nftablesDrift(runner: CommandRunner, input: NftDriftInput): Promise<DriftReport> {
  const desiredText = await listRendered(runner, input.script);
  const live = await readLiveKproxyTables(runner);
  const foreign = await readForeignTables(runner);
  const desired = parseNftRuleset(desiredText);
  const held = parseNftRuleset(live.text);
  const others = parseNftRuleset(foreign.text);
  const pieces = [
    ...FAMILIES.flatMap((family) =>
      compareTable(
        `${family} ${TABLE}`,
        desired.tables.get(`${family} ${TABLE}`),
        held.tables.get(`${family} ${TABLE}`),
        input.servicePorts,
        INDEXED_MAPS,
      ),
    ),
    ...leftovers(others),
  ];
  return {
    mode: 'nftables',
    pieces,
    foreign: judgeForeign(live.text, foreign.text, others, input.servicePorts, input.localAddresses),
    unreadable: [...live.unreadable, ...foreign.unreadable],
  };
}

/** The nftables mode's reader: planFull's script for each state (ipvs.scheduler's) against the kernel. */
export function nftablesDriftReader(runner: CommandRunner, scheduler: string | undefined): DriftReader {
  const planner = createNftablesPlanner({ scheduler });
  return async (state) =>
    nftablesDrift(runner, {
      script: planner
        .inputs(planner.planFull(state))
        .map((input) => input.input)
        .join(''),
      servicePorts: servicePortsOf(state),
      localAddresses: await readLocalAddresses(runner),
    });
}
