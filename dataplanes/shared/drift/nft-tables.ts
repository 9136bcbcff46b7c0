// kproxy's nftables tables (the nftables mode's, the IPVS mode's companion) compared with the
// render: both as nft 1.0.6 lists them, the render loaded as a scratch table beside the live ones
// (../nft/scratch-table.ts: dormant, owned by the nft that lists it, gone when it exits), so a rule
// the kernel spells differently from the script (`{ 10.96.0.0/12 }`, `3600s`) is not drift. Rules
// are compared as a multiset per chain (a reordered chain is not reported).
import { randomBytes } from 'node:crypto';
import type { ServicePort } from '../../../contract/proxy-state.ts';
import type { CommandRunner } from '../command-runner.ts';
import { CANARY_SET } from '../nft/ruleset.ts';
import { SCRATCH_TABLE_PREFIX, scratchTable } from '../nft/scratch-table.ts';
import type { NftFamily, NftTransaction } from '../nft/transaction.ts';
import { elementKey, type NftElement, type NftTable, parseNftRuleset } from '../trace/nft-ruleset.ts';
import { type DriftPiece, multisetDifference, NODE_WIDE, serviceOfText } from './drift-report.ts';

/**
 * One `nft -i` loads the scratch table and lists it: the table lives only as long as that nft's
 * socket. The script is the runner's stdin file (never a pipe: command-runner.ts), which the shell
 * keeps as fd 3 for nft to include while nft reads the commands from a pipe.
 */
const LOAD_AND_LIST = 'exec 3<&0; printf "%s\n" "$@" | nft -i';

/** The render (a full plan's transactions) as the kernel lists it, by family: a scratch table's. */
export async function listRendered(
  runner: CommandRunner,
  transactions: Iterable<NftTransaction | undefined>,
): Promise<ReadonlyMap<NftFamily, NftTable>> {
  const name = `${SCRATCH_TABLE_PREFIX}${process.pid}-${randomBytes(4).toString('hex')}`;
  const { script, families } = scratchTable(transactions, name);
  const commands = ['include "/proc/self/fd/3"', ...families.map((family) => `list table ${family} ${name}`)];
  const result = await runner.run('sh', ['-c', LOAD_AND_LIST, 'sh', ...commands], script);
  // nft -i goes on after a failed command and exits 0: any error text is the load's or a listing's.
  if (result.exitCode !== 0 || result.stderr.trim() !== '')
    throw new Error(`loading the render as scratch table ${name}: ${result.stderr.trim()}`);
  const listed = parseNftRuleset(result.stdout);
  const tables = new Map<NftFamily, NftTable>();
  for (const family of families) {
    const table = listed.tables.get(`${family} ${name}`);
    if (!table) throw new Error(`scratch table ${family} ${name} was loaded but not listed`);
    tables.set(family, table);
  }
  return tables;
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

/**
 * Differences between one family's desired and live kproxy table. `indexedMaps`: maps keyed by a
 * key and an endpoint's index, whose endpoints are compared as a multiset per key (compareIndexed).
 */
export function compareTable(
  where: string,
  desired: NftTable | undefined,
  live: NftTable | undefined,
  servicePorts: readonly ServicePort[],
  indexedMaps: ReadonlySet<string> = new Set(),
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
    if (!indexedMaps.has(name)) {
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
