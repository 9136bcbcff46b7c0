// kproxy's nftables tables (the nftables mode's, the IPVS mode's companion) compared with the
// render: both as nft 1.0.6 lists them, the render loaded as a scratch table beside the live ones
// (../nft/scratch-table.ts: dormant, owned by the nft that lists it, gone when it exits), so a rule
// the kernel spells differently from the script (`{ 10.96.0.0/12 }`, `3600s`) is not drift. Rules
// are compared as a multiset per chain (a reordered chain is not reported).
//
// At scale (compareWithRender) the elements, nearly all of the tables (~450,000 at 30,000
// Services × 10 endpoints), are not listed back: the live tables are read as they stream
// (streamed-listing.ts) and each rendered element spelled exactly as the kernel lists one is that
// one (the kernel lists what it was given in one spelling, so the scratch table would list it so
// too). Only the rest goes into the scratch table: the elements no listed one spells alike, and of
// an indexed map every dispatch key either side has such an element under, whole; interval sets
// (the kernel may list ranges merged) go in whole. What compareTable is given is thus what it would
// find different in the whole, and it reports the same pieces.
import { randomBytes } from 'node:crypto';
import { runInSlices, type Steps } from '../../../contract/base/work-slices.ts';
import type { ServicePort } from '../../../contract/proxy-state.ts';
import type { CommandRunner } from '../command-runner.ts';
import { CANARY_SET, FAMILIES } from '../nft/ruleset.ts';
import { SCRATCH_TABLE_PREFIX, scratchTable } from '../nft/scratch-table.ts';
import { type ElementSpec, type NftFamily, NftTransaction, type SetSpec } from '../nft/transaction.ts';
import {
  elementKey,
  type NftElement,
  type NftRuleset,
  type NftTable,
  parseElements,
  parseNftRuleset,
  tokenize,
} from '../trace/nft-ruleset.ts';
import { type DriftPiece, multisetDifference, NODE_WIDE, serviceOfText } from './drift-report.ts';
import { elementText, listedElementText } from './listed-elements.ts';
import { type StreamedTables, streamTables } from './streamed-listing.ts';

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

export interface RenderComparison {
  readonly pieces: DriftPiece[];
  readonly unreadable: readonly string[];
  /** kproxy's tables as the kernel holds them, every element included (for the tracer), parsed in slices. */
  readonly live: () => Promise<NftRuleset>;
}

export interface RenderComparisonInput {
  /** kproxy's table name in each family. */
  readonly table: string;
  /** The render: a full plan's transactions (only tables, sets, chains, rules, added elements). */
  readonly transactions: Iterable<NftTransaction | undefined>;
  readonly servicePorts: readonly ServicePort[];
  /** The maps whose endpoints compare as a multiset per key (compareTable). */
  readonly indexedMaps: ReadonlySet<string>;
}

/** compareTable of each family's live table against the render's, as the file's header says. */
export async function compareWithRender(
  runner: CommandRunner,
  input: RenderComparisonInput,
): Promise<RenderComparison> {
  const listed = await streamTables(runner, input.table, FAMILIES);
  // Each step over the whole render or listing in slices: the daemon's event loop (/healthz,
  // informer events) must not wait out seconds of it at 30,000 Services.
  const unmatched = await runInSlices(unmatchedRenderSteps(input.transactions, listed, input.table));
  await runInSlices(widenIndexedMapsSteps(unmatched, listed, input.indexedMaps));
  const desired = await listRendered(runner, [unmatched]);
  const held = await runInSlices(liveTablesSteps(listed, 'unmatched'));
  return {
    pieces: FAMILIES.flatMap((family) =>
      compareTable(
        `${family} ${input.table}`,
        desired.get(family),
        held.tables.get(`${family} ${input.table}`),
        input.servicePorts,
        input.indexedMaps,
      ),
    ),
    unreadable: listed.unreadable,
    live: () => runInSlices(liveTablesSteps(listed, 'all')),
  };
}

/** An element as the render writes it, spelled as listedElementText spells a listed one. */
function renderedText(element: ElementSpec): string {
  return element.value === undefined ? element.key : `${element.key} : ${element.value}`;
}

/**
 * The render without the elements the kernel lists exactly so (each matched with that listed
 * one). Interval sets keep all of theirs.
 */
function* unmatchedRenderSteps(
  transactions: Iterable<NftTransaction | undefined>,
  listed: StreamedTables,
  table: string,
): Steps<NftTransaction> {
  const kept = new NftTransaction(table);
  const declared = new Map<string, SetSpec>();
  for (const tx of transactions) {
    // The render pauses (undefined) while it builds: at 30,000 Services that is seconds.
    if (tx === undefined) yield;
    for (const op of tx?.ops ?? []) {
      if (op.object === 'table' && op.verb === 'delete')
        for (const [key, elements] of listed.elements)
          if (key.startsWith(`${op.family} `)) elements.unmatchAll();
      if (op.object === 'set' && op.verb === 'add') declared.set(`${op.family} ${op.set.name}`, op.set);
      if (op.object !== 'element') {
        kept.push(op);
        continue;
      }
      if (op.verb !== 'add') throw new Error(`the render deletes elements of ${op.set}: not a full plan`);
      const key = `${op.family} ${op.set}`;
      // A set the render never declared would fail to load: left whole for the scratch table to say so.
      const spec = declared.get(key);
      const whole = spec === undefined || (spec.flags ?? []).includes('interval');
      const elements = whole ? undefined : listed.elements.get(key);
      let left = op.elements;
      if (elements) {
        const unmatched: ElementSpec[] = [];
        for (const [at, element] of op.elements.entries()) {
          if ((at + 1) % ELEMENTS_PER_STEP === 0) yield;
          if (elements.match(renderedText(element)) === 'none') unmatched.push(element);
        }
        left = unmatched;
      }
      if (left.length > 0) kept.push({ ...op, elements: left });
    }
  }
  return kept;
}

/** `a . b . 3 : c` → `a . b`: an indexed map element's key without its index (byDispatchKey's). */
function dispatchKeyOf(text: string): string {
  const key = text.split(' : ')[0]!;
  const last = key.lastIndexOf(' . ');
  return last < 0 ? '' : key.slice(0, last);
}

/**
 * Of each indexed map, every dispatch key with an element unmatched on either side compared
 * whole, as compareIndexed compares it: its matched listed elements are unmatched again and given
 * to the scratch table as they are spelled (the render's spelling: they matched it exactly).
 */
function* widenIndexedMapsSteps(
  render: NftTransaction,
  listed: StreamedTables,
  indexedMaps: ReadonlySet<string>,
): Steps<void> {
  const affected = new Map<string, Set<string>>();
  const affect = (family: NftFamily, set: string, text: string) => {
    const key = `${family} ${set}`;
    const keys = affected.get(key) ?? new Set<string>();
    affected.set(key, keys.add(dispatchKeyOf(text)));
  };
  for (const op of render.ops)
    if (op.object === 'element' && indexedMaps.has(op.set))
      for (const element of op.elements) affect(op.family, op.set, listedElementText(renderedText(element)));
  for (const family of FAMILIES)
    for (const set of indexedMaps) {
      const elements = listed.elements.get(`${family} ${set}`);
      if (!elements) continue;
      for (let position = 0; position < elements.size; position++) {
        if ((position + 1) % ELEMENTS_PER_STEP === 0) yield;
        if (!elements.isMatched(position)) affect(family, set, elements.text(position));
      }
      const keys = affected.get(`${family} ${set}`);
      if (!keys) continue;
      const widened: ElementSpec[] = [];
      for (let position = 0; position < elements.size; position++) {
        if ((position + 1) % ELEMENTS_PER_STEP === 0) yield;
        if (!elements.isMatched(position)) continue;
        const text = elements.text(position);
        if (!keys.has(dispatchKeyOf(text))) continue;
        elements.unmatch(position);
        const [key, value] = text.split(' : ');
        widened.push({ key: key!, ...(value !== undefined && { value }) });
      }
      if (widened.length > 0) render.addElements(family, set, widened);
    }
}

/**
 * The listed tables, parsed, with all their elements or those left to compare (unmatched, of sets
 * whose elements are compared).
 */
function* liveTablesSteps(listed: StreamedTables, which: 'all' | 'unmatched'): Steps<NftRuleset> {
  const ruleset = parseNftRuleset(listed.skeleton);
  for (const [key, elements] of listed.elements) {
    const [family, set] = key.split(' ');
    const table = [...ruleset.tables.values()].find((t) => t.family === family);
    const target = table?.sets.get(set!);
    if (!target || (which === 'unmatched' && !comparesElements(target))) continue;
    for (let position = 0; position < elements.size; position++) {
      // All of them at 30,000 Services are ~450,000 elements: seconds of parsing.
      if ((position + 1) % ELEMENTS_PER_STEP === 0) yield;
      if (which === 'all' || !elements.isMatched(position))
        for (const element of parseElements(tokenize(elements.text(position)))) target.elements.push(element);
    }
  }
  return ruleset;
}

/** Listed elements parsed or looked at between two steps. */
const ELEMENTS_PER_STEP = 256;
