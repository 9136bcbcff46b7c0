// An in-memory nft for tests (knftables' fake): it reads the script text kproxy sends, with the
// tracer's parser (dataplanes/shared/trace/nft-ruleset.ts: one parser, not a second), applies it
// all-or-nothing and refuses what the kernel would: a missing table, chain, set or element, a
// rule or verdict naming a missing chain or set, an object redeclared differently, deleting a
// chain or set still in use or a chain not empty. Kept stricter than nft in one way: adding an
// element that exists is refused (kproxy's record must know what the kernel holds), except in a
// check (`nft -c`, the intact check), which answers as the kernel: refused only with another value. Its state
// is the ruleset the tracer walks, so a test asks it what happens to a packet; dump() compares
// states; the listings the live dataplane reads (adoption, canary, `nft -c`) come from that state.
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import type { NftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { TABLE } from '../../../dataplanes/shared/nft/transaction.ts';
import { traceNftables } from '../../../dataplanes/shared/trace/nft.ts';
import {
  applyNftCommand,
  elementKey,
  emptyNftRuleset,
  type NftChain,
  type NftCommand,
  type NftElement,
  type NftRuleset,
  type NftSet,
  type NftTable,
  parseNftCommands,
} from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import type { TraceReport } from '../../../dataplanes/shared/trace/outcome.ts';
import type { TraceHost, TracePacket } from '../../../dataplanes/shared/trace/packet.ts';

const MISSING = 'No such file or directory';
const EXISTS = 'File exists';
const BUSY = 'Device or resource busy';

function refuse(reason: string, what: string): never {
  throw new NftError('-f', `Error: Could not process rule: ${reason}\n${what}`);
}

/** Chain names a rule or verdict jumps to. */
function chainRefs(tokens: readonly string[]): string[] {
  return tokens.flatMap((token, i) => (i > 0 && /^(goto|jump)$/.test(tokens[i - 1]!) ? [token] : []));
}

/** Set and map names a rule looks up (`@name`). */
function setRefs(tokens: readonly string[]): string[] {
  return tokens.flatMap((token) => (/^@[A-Za-z][\w./-]*$/.test(token) ? [token.slice(1)] : []));
}

/** Who in `table` refers to `name` (rules and verdict map elements). */
function users(table: NftTable, name: string, refs: (tokens: readonly string[]) => string[]): string[] {
  const found: string[] = [];
  for (const chain of table.chains.values())
    if (chain.rules.some((rule) => refs(rule.tokens).includes(name))) found.push(`chain ${chain.name}`);
  for (const set of table.sets.values())
    if (set.elements.some((e) => e.value && refs(e.value).includes(name))) found.push(`map ${set.name}`);
  return found;
}

const hookOf = (chain: NftChain) => JSON.stringify([chain.hook, chain.policy]);
const declarationOf = ({ elements: _, comment: __, ...declaration }: NftSet) => JSON.stringify(declaration);

/**
 * A copy of a ruleset that shares what a transaction leaves alone: a table, chain or set is copied
 * when a command first touches it (a copy of the whole ruleset per script was most of a seeded
 * test's time). Neither ruleset is changed after its transaction, so sharing is safe.
 */
class CopyOnWrite {
  readonly next: NftRuleset;
  readonly #owned = new Set<object>();

  constructor(ruleset: NftRuleset) {
    this.next = { tables: new Map(ruleset.tables), unknown: [...ruleset.unknown] };
  }

  /** Makes what `command` may change this transaction's own. */
  own(command: NftCommand): void {
    if (command.object === 'unknown' || command.object === 'listing') return;
    const key = `${command.family} ${command.table}`;
    const shared = this.next.tables.get(key);
    if (shared === undefined) return;
    const table = this.#ownTable(key, shared);
    if (command.object === 'table') {
      // A flush empties every chain and set of the table.
      if (command.verb === 'flush') {
        for (const name of table.chains.keys()) this.#ownChain(table, name);
        for (const name of table.sets.keys()) this.#ownSet(table, name);
      }
      return;
    }
    if (command.object === 'chain' || command.object === 'rule') this.#ownChain(table, command.name);
    else this.#ownSet(table, command.name);
  }

  #ownTable(key: string, table: NftTable): NftTable {
    if (this.#owned.has(table)) return table;
    const copy = { ...table, chains: new Map(table.chains), sets: new Map(table.sets) };
    this.#owned.add(copy);
    this.next.tables.set(key, copy);
    return copy;
  }

  #ownChain(table: NftTable, name: string): void {
    const chain = table.chains.get(name);
    if (chain === undefined || this.#owned.has(chain)) return;
    const copy = { ...chain, rules: [...chain.rules] };
    this.#owned.add(copy);
    table.chains.set(name, copy);
  }

  #ownSet(table: NftTable, name: string): void {
    const set = table.sets.get(name);
    if (set === undefined || this.#owned.has(set)) return;
    const copy = { ...set, elements: [...set.elements] };
    this.#owned.add(copy);
    table.sets.set(name, copy);
  }
}

/**
 * One transaction on a copy of `ruleset`: the state after it, or NftError and no change.
 * `checking`: as `nft -c` answers, adding an element that exists with the same value is a no-op.
 */
export function applyScript(ruleset: NftRuleset, script: string, checking = false): NftRuleset {
  const copy = new CopyOnWrite(ruleset);
  const { next } = copy;
  // Element keys per set, built when a set is first touched: membership at any size.
  const keys = new Map<NftSet, Set<string>>();
  const keysOf = (set: NftSet) => {
    const known = keys.get(set) ?? new Set(set.elements.map(elementKey));
    keys.set(set, known);
    return known;
  };
  for (const command of parseNftCommands(script)) {
    if (checking && existingElements(next, command)) continue;
    // Before check: it indexes a set's keys by the set object it will change.
    copy.own(command);
    check(next, command, keysOf);
    applyNftCommand(next, command);
  }
  return next;
}

/** An `add element` whose elements all exist, with the same values: the kernel's no-op. */
function existingElements(ruleset: NftRuleset, command: NftCommand): boolean {
  if (command.object !== 'element' || command.verb !== 'add') return false;
  const set = ruleset.tables.get(`${command.family} ${command.table}`)?.sets.get(command.name);
  if (!set) return false;
  const values = new Map(set.elements.map((e) => [elementKey(e), JSON.stringify(e.value)]));
  return command.elements.every((e) => values.get(elementKey(e)) === JSON.stringify(e.value));
}

/** Refuses (throws) a command the kernel would refuse in `ruleset`'s state. */
function check(ruleset: NftRuleset, command: NftCommand, keysOf: (set: NftSet) => Set<string>): void {
  if (command.object === 'unknown') refuse('syntax error', command.text);
  if (command.object === 'listing') refuse('syntax error', `table ${command.table.name} { … }`);
  const { verb, family, table: tableName } = command;
  const table = ruleset.tables.get(`${family} ${tableName}`);
  const what = `${verb} ${command.object} ${family} ${tableName}${command.object === 'table' ? '' : ` ${command.name}`}`;
  const tolerant = verb === 'destroy';
  if (command.object === 'table') {
    if (verb === 'create' && table) refuse(EXISTS, what);
    if ((verb === 'delete' || verb === 'flush') && !table) refuse(MISSING, what);
    if (verb === 'flush') for (const set of table?.sets.values() ?? []) keysOf(set).clear();
    return;
  }
  if (!table) refuse(MISSING, what);
  switch (command.object) {
    case 'chain': {
      const chain = table.chains.get(command.name);
      if (command.chain) {
        if (chain && (verb === 'create' || hookOf(chain) !== hookOf(command.chain))) refuse(EXISTS, what);
        return;
      }
      if (!chain) {
        if (tolerant) return;
        refuse(MISSING, what);
      }
      if (verb === 'flush') return;
      if (chain.rules.length > 0) refuse(BUSY, `${what}: not empty`);
      const found = users(table, command.name, chainRefs);
      if (found.length > 0) refuse(BUSY, `${what}: used by ${found.join(', ')}`);
      return;
    }
    case 'set': {
      const set = table.sets.get(command.name);
      if (command.set) {
        if (set && (verb === 'create' || declarationOf(set) !== declarationOf(command.set)))
          refuse(EXISTS, what);
        return;
      }
      if (!set) {
        if (tolerant) return;
        refuse(MISSING, what);
      }
      if (verb === 'flush') {
        keysOf(set).clear();
        return;
      }
      const found = users(table, command.name, setRefs);
      if (found.length > 0) refuse(BUSY, `${what}: used by ${found.join(', ')}`);
      return;
    }
    case 'rule': {
      const chain = table.chains.get(command.name);
      if (!chain) refuse(MISSING, what);
      if (command.index !== undefined && command.index >= chain.rules.length)
        refuse(MISSING, `${what}: no rule at index ${command.index}`);
      for (const ref of chainRefs(command.rule.tokens))
        if (!table.chains.has(ref)) refuse(MISSING, `${what}: no chain ${ref}`);
      for (const ref of setRefs(command.rule.tokens))
        if (!table.sets.has(ref)) refuse(MISSING, `${what}: no set ${ref}`);
      return;
    }
    case 'element': {
      const set = table.sets.get(command.name);
      if (!set) refuse(MISSING, what);
      checkElements(table, set, command.elements, verb === 'add' || verb === 'create', keysOf(set), what);
      return;
    }
  }
}

function checkElements(
  table: NftTable,
  set: NftSet,
  elements: readonly NftElement[],
  adds: boolean,
  known: Set<string>,
  what: string,
): void {
  for (const element of elements) {
    const key = elementKey(element);
    if (!adds) {
      if (!known.delete(key)) refuse(MISSING, `${what} { ${key} }`);
      continue;
    }
    if (known.has(key)) refuse(EXISTS, `${what} { ${key} }`);
    if (set.isMap !== (element.value !== undefined)) refuse('syntax error', `${what} { ${key} }: map value`);
    for (const ref of chainRefs(element.value ?? []))
      if (!table.chains.has(ref)) refuse(MISSING, `${what} { ${key} }: no chain ${ref}`);
    known.add(key);
  }
}

/** A canonical form of the state (creation order ignored) for comparing two of them. */
export function dump(ruleset: NftRuleset): unknown {
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
  return [...ruleset.tables]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, table]) => ({
      table: key,
      sets: [...table.sets.values()].sort(byName).map((set) => ({
        ...set,
        elements: set.elements
          .map((e) => ({ ...e, key: elementKey(e), value: e.value?.join(' ') }))
          .sort((a, b) => (a.key < b.key ? -1 : 1)),
      })),
      chains: [...table.chains.values()]
        .sort(byName)
        .map((chain) => ({ ...chain, rules: chain.rules.map((rule) => rule.text) })),
    }));
}

/** Endpoint maps keyed `… . index` (endpoint-slots.ts): `backends-tcp`, `affinity-local-backends-ips`, … */
const INDEXED_MAP = /backends(-(tcp|udp|sctp))?(-ips)?$/;

/**
 * dump(), but each key's endpoints as a multiset: the index of an endpoint map element is left
 * out when the key's indexes are exactly 0..N-1 (else kept, so the two dumps differ). A full sync
 * numbers endpoints in address order and incremental syncs keep their slots (endpoint-slots.ts):
 * two kernels equal in this form send every key to the same endpoints.
 */
export function dumpUpToNumbering(ruleset: NftRuleset): unknown {
  const tables = dump(ruleset) as { sets: { name: string; elements: { key: string; value?: string }[] }[] }[];
  for (const table of tables) {
    for (const set of table.sets) {
      if (!INDEXED_MAP.test(set.name)) continue;
      const indexes = new Map<string, number[]>();
      for (const e of set.elements) {
        const cut = e.key.lastIndexOf(' . ');
        const prefix = e.key.slice(0, cut);
        indexes.set(prefix, [...(indexes.get(prefix) ?? []), Number(e.key.slice(cut + 3))]);
      }
      const dense = (prefix: string) =>
        indexes
          .get(prefix)!
          .sort((a, b) => a - b)
          .every((i, n) => i === n);
      set.elements = set.elements
        .map((e) => {
          const prefix = e.key.slice(0, e.key.lastIndexOf(' . '));
          return dense(prefix) ? { ...e, key: `${prefix} . *` } : e;
        })
        .sort((a, b) =>
          a.key < b.key ? -1 : a.key > b.key ? 1 : (a.value ?? '') < (b.value ?? '') ? -1 : 1,
        );
    }
  }
  return tables;
}

/** A port or index as `nft -j` prints it: a number; anything else a string. */
function jsonAtom(component: string): string | number {
  return /^\d+$/.test(component) ? Number(component) : component;
}

function jsonKey(components: readonly string[]): unknown {
  return components.length === 1 ? jsonAtom(components[0]!) : { concat: components.map(jsonAtom) };
}

/** The fake as the live dataplane's NftRunner: every script it runs changes `ruleset`. */
export class FakeNft implements NftRunner {
  ruleset: NftRuleset = emptyNftRuleset();
  /** Every script run (refused ones are not). */
  readonly scripts: string[] = [];

  async run(script: string): Promise<void> {
    this.ruleset = applyScript(this.ruleset, script);
    this.scripts.push(script);
  }

  /** `nft -c`: whether the script would apply; nothing changes. */
  async check(script: string): Promise<boolean> {
    try {
      applyScript(this.ruleset, script, true);
      return true;
    } catch (error) {
      if (error instanceof NftError) return false;
      throw error;
    }
  }

  async listChainsJson(family: string): Promise<unknown> {
    const chains = [...this.ruleset.tables.values()]
      .filter((table) => table.family === family)
      .flatMap((table) =>
        [...table.chains.values()].map((chain, handle) => ({
          chain: { family, table: table.name, name: chain.name, handle: handle + 1 },
        })),
      );
    return { nftables: [{ metainfo: { json_schema_version: 1 } }, ...chains] };
  }

  async listSetJson(family: string, name: string): Promise<unknown> {
    const set = this.ruleset.tables.get(`${family} ${TABLE}`)?.sets.get(name);
    if (!set || set.isMap) return undefined;
    const elem = set.elements.map((e) => jsonKey(e.key));
    const listed = { family, name, table: TABLE, ...(elem.length > 0 && { elem }) };
    return { nftables: [{ metainfo: { json_schema_version: 1 } }, { set: listed }] };
  }

  trace(packet: TracePacket, host: TraceHost): TraceReport {
    return traceNftables(this.ruleset, packet, { host });
  }

  dump(): unknown {
    return dump(this.ruleset);
  }
}
