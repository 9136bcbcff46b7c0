// What the other owners' nft tables hold, for the drift readers: other kproxy modes' leftovers,
// extra whoever they served (`kproxy cleanup` removes them; so does `kproxy run` after its first
// full sync), and (nft-based modes) the rules on hooks, each judged by the mode's tracer.
import type { ServicePort } from '../../../contract/proxy-state.ts';
import type { CommandRunner } from '../command-runner.ts';
import { KPROXY_TABLES } from '../trace/nft.ts';
import { listTableNames } from '../trace/nft-live.ts';
import type { NftRuleset, NftTable } from '../trace/nft-ruleset.ts';
import type { TraceReport } from '../trace/outcome.ts';
import type { TracePacket } from '../trace/packet.ts';
import { type DriftPiece, type ForeignRule, judged, NODE_WIDE } from './drift-report.ts';
import { foreignHits } from './foreign-hits.ts';

/** The iptables mode's chains (dataplanes/iptables/chain-names.ts), in iptables-nft's tables. */
const IPTABLES_CHAIN = /\bKPROXY-/;

const MODE_OF_TABLE: Readonly<Record<string, string>> = { kproxy: 'nftables', 'kproxy-ipvs': 'ipvs' };

/** Another kproxy mode's table (not `own`), chain, or jump to one of its chains. */
function isLeftover(table: NftTable, own: string, chain: string, rule?: string): boolean {
  const otherMode = KPROXY_TABLES.has(table.name) && table.name !== own;
  return otherMode || IPTABLES_CHAIN.test(chain) || IPTABLES_CHAIN.test(rule ?? '');
}

/** Other kproxy modes' objects among the tables of `foreign` (`own`: the mode's own table). */
export function nftLeftovers(foreign: NftRuleset, own: string): DriftPiece[] {
  const pieces: DriftPiece[] = [];
  const extra = (where: string, text: string) =>
    pieces.push({ kind: 'extra', service: NODE_WIDE, where, text });
  for (const table of foreign.tables.values()) {
    const where = `${table.family} ${table.name}`;
    if (isLeftover(table, own, '')) {
      extra(where, `table ${where}: the ${MODE_OF_TABLE[table.name]} mode's leftover`);
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
 * ClusterIP, external and LoadBalancer address of each port traced (`tracer` makes the trace,
 * through kproxy's live rules and the foreign tables together; asked only when there is a foreign
 * rule to judge, since reading kproxy's tables whole for it costs seconds at 30,000 Services) from
 * outside and from the node.
 */
export async function judgeNftForeign(
  foreign: NftRuleset,
  tracer: () => Promise<(packet: TracePacket) => TraceReport>,
  servicePorts: readonly ServicePort[],
  localAddresses: readonly string[],
): Promise<ForeignRule[]> {
  const rules = new Map<string, { where: string; text: string }>();
  for (const table of foreign.tables.values())
    for (const chain of table.chains.values()) {
      if (!chain.hook) continue;
      for (const rule of chain.rules) {
        // Leftovers of any kproxy mode are kproxy's, reported as extra.
        if (isLeftover(table, '', chain.name, rule.text)) continue;
        const where = `${table.family} ${table.name} chain ${chain.name} (${chain.hook.hook})`;
        rules.set(`${where}\n${rule.text}`, { where, text: rule.text });
      }
    }
  if (rules.size === 0) return [];
  const hits = await foreignHits(
    servicePorts,
    localAddresses,
    await tracer(),
    // Steps in nft tables ("ip guard") that are not kproxy's; IPVS's own steps name no family.
    (step) => {
      const name = step.table.split(' ')[1];
      return name !== undefined && !KPROXY_TABLES.has(name);
    },
    (step) => `${step.table} chain ${step.chain} (${step.hook})\n${step.text}`,
  );
  return judged(rules, hits);
}

/**
 * The nft-based modes' tables as the iptables mode finds them (listTableNames: their names are all
 * it reads): each an extra piece.
 */
export async function leftoverTables(
  runner: CommandRunner,
): Promise<{ pieces: DriftPiece[]; unreadable: string[] }> {
  const names = await listTableNames(runner);
  if ('error' in names) return { pieces: [], unreadable: [names.error] };
  const pieces: DriftPiece[] = [];
  for (const { family, name } of names.tables) {
    if (!KPROXY_TABLES.has(name)) continue;
    const text = `table ${family} ${name}: the ${MODE_OF_TABLE[name]} mode's leftover`;
    pieces.push({ kind: 'extra', service: NODE_WIDE, where: `${family} ${name}`, text });
  }
  return { pieces, unreadable: [] };
}
