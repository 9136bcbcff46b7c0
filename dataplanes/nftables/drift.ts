// `kproxy diff` for the nftables mode: kproxy's tables as the kernel holds them against the
// render of the same objects, and the other owners' rules that change a Service's packets.
//
// Both sides are compared as nft 1.0.6 lists them: the render is loaded into a network namespace
// of its own (unshare: nothing else in it, gone when nft exits) and listed back, so a rule the
// kernel spells differently from the script (`{ 10.96.0.0/12 }`, `3600s`) is not drift. The live
// side is read table by table (trace-live.ts). Rules are compared as a multiset per chain (a
// reordered chain is not reported).
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import {
  type DriftPiece,
  type DriftReader,
  type DriftReport,
  type ForeignRule,
  judged,
  multisetDifference,
  NODE_WIDE,
  serviceOfText,
  servicePortsOf,
} from '../shared/drift/drift-report.ts';
import { foreignHits } from '../shared/drift/foreign-hits.ts';
import { CANARY_SET, FAMILIES } from '../shared/nft/ruleset.ts';
import { TABLE } from '../shared/nft/transaction.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';
import { KPROXY_TABLES, traceNftables } from '../shared/trace/nft.ts';
import {
  elementKey,
  type NftElement,
  type NftRuleset,
  type NftTable,
  parseNftRuleset,
} from '../shared/trace/nft-ruleset.ts';
import { createNftablesPlanner } from './planner.ts';
import { INDEXED_MAPS } from './sets.ts';
import { readForeignTables, readLiveKproxyTables } from './trace-live.ts';

/** The render (`nft -f` script) as nft lists it, loaded in a network namespace of its own. */
export async function listRendered(runner: CommandRunner, script: string): Promise<string> {
  const result = await runner.run('unshare', ['--net', 'sh', '-c', 'nft -f - && nft list ruleset'], script);
  if (result.exitCode !== 0)
    throw new Error(`loading the render into a scratch namespace: ${result.stderr.trim()}`);
  return result.stdout;
}

/** Sets the kernel fills from packets (ClientIP affinity), and the sync's nonce: not the render's. */
function comparesElements(set: { name: string; flags: readonly string[] }): boolean {
  return set.name !== CANARY_SET && !set.flags.includes('dynamic');
}

const VERDICT = /^(goto|jump|accept|drop|return|continue)$/;

function elementText({ key, value }: NftElement): string {
  if (!value) return key.join(' . ');
  return `${key.join(' . ')} : ${value.join(VERDICT.test(value[0] ?? '') ? ' ' : ' . ')}`;
}

/** Differences between one family's desired and live kproxy table. */
function compareTable(
  where: string,
  desired: NftTable | undefined,
  live: NftTable | undefined,
  servicePorts: readonly ServicePort[],
): DriftPiece[] {
  if (desired === undefined && live === undefined) return [];
  if (desired === undefined || live === undefined) {
    return [{ kind: desired ? 'missing' : 'extra', service: NODE_WIDE, where, text: `table ${where}` }];
  }
  const pieces: DriftPiece[] = [];
  const piece = (kind: DriftPiece['kind'], at: string, text: string, hint: string, expected?: string) =>
    pieces.push({
      kind,
      service: serviceOfText(expected ?? text, servicePorts, hint),
      where: `${where} ${at}`,
      text,
      ...(expected !== undefined && { expected }),
    });
  for (const name of new Set([...desired.chains.keys(), ...live.chains.keys()])) {
    const want = desired.chains.get(name);
    const have = live.chains.get(name);
    if (!want || !have) {
      piece(want ? 'missing' : 'extra', `chain ${name}`, `chain ${name}`, name);
      continue;
    }
    const { missing, extra } = multisetDifference(
      want.rules.map((rule) => rule.text),
      have.rules.map((rule) => rule.text),
    );
    for (const text of missing) piece('missing', `chain ${name}`, text, name);
    for (const text of extra) piece('extra', `chain ${name}`, text, name);
  }
  for (const name of new Set([...desired.sets.keys(), ...live.sets.keys()])) {
    const want = desired.sets.get(name);
    const have = live.sets.get(name);
    const kind = (want ?? have)!.isMap ? 'map' : 'set';
    if (!want || !have) {
      piece(want ? 'missing' : 'extra', `${kind} ${name}`, `${kind} ${name}`, name);
      continue;
    }
    if (!comparesElements(want)) continue;
    const at = `${kind} ${name}`;
    const report = (kind: DriftPiece['kind'], text: string, expected?: string) =>
      piece(kind, at, text, name, expected);
    if (!INDEXED_MAPS.has(name)) {
      compareElements(want.elements, have.elements, report);
      continue;
    }
    const held = byDispatchKey(have.elements);
    for (const [key, group] of byDispatchKey(want.elements)) {
      compareIndexed(group, held.get(key) ?? [], report);
      held.delete(key);
    }
    for (const group of held.values()) for (const element of group) report('extra', elementText(element));
  }
  return pieces;
}

/** Elements by key: missing, extra, or different (the key held with another value). */
function compareElements(
  want: readonly NftElement[],
  have: readonly NftElement[],
  report: (kind: DriftPiece['kind'], text: string, expected?: string) => void,
): void {
  const held = new Map(have.map((element) => [elementKey(element), element]));
  for (const element of want) {
    const key = elementKey(element);
    const found = held.get(key);
    held.delete(key);
    if (!found) report('missing', elementText(element));
    else if (elementText(found) !== elementText(element))
      report('different', elementText(found), elementText(element));
  }
  for (const element of held.values()) report('extra', elementText(element));
}

/** An indexed map's elements by their key without the index: one group per dispatch key. */
function byDispatchKey(elements: readonly NftElement[]): Map<string, NftElement[]> {
  const groups = new Map<string, NftElement[]>();
  for (const element of elements) {
    const key = element.key.slice(0, -1).join(' . ');
    const group = groups.get(key) ?? [];
    group.push(element);
    groups.set(key, group);
  }
  return groups;
}

/**
 * One dispatch key's elements of an indexed map: after incremental syncs an endpoint may hold
 * another index than the render gives it (its slot, endpoint-slots.ts), so the endpoints are
 * compared as a multiset, and only those unmatched by key (a changed endpoint shows as different,
 * a deleted one as missing).
 */
function compareIndexed(
  want: readonly NftElement[],
  have: readonly NftElement[],
  report: (kind: DriftPiece['kind'], text: string, expected?: string) => void,
): void {
  const endpointOf = (element: NftElement) => (element.value ?? []).join(' . ');
  const { missing, extra } = multisetDifference(want.map(endpointOf), have.map(endpointOf));
  const unmatched = (elements: readonly NftElement[], values: readonly string[]) => {
    const left = new Map<string, number>();
    for (const value of values) left.set(value, (left.get(value) ?? 0) + 1);
    return elements.filter((element) => {
      const count = left.get(endpointOf(element)) ?? 0;
      if (count > 0) left.set(endpointOf(element), count - 1);
      return count > 0;
    });
  };
  compareElements(unmatched(want, missing), unmatched(have, extra), report);
}

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
