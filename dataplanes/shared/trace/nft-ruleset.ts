// nft text → the tables, chains, sets and maps it holds, for the tracer. Reads both forms kproxy
// meets: the script it sends (`add table …`, `add rule …`, `add element … { … }`, what `render`
// prints) and the kernel's listing (`nft list ruleset`: nested `table … { chain … { … } }`).
// Rules stay token lists here; nft-rule.ts gives them meaning.

export interface NftElement {
  /** Key components (the parts between ` . `), as written. */
  readonly key: readonly string[];
  /** Map value: components for data maps, verdict tokens (`goto`, `x`) for verdict maps. */
  readonly value?: readonly string[];
  readonly comment?: string;
}

export interface NftSet {
  readonly name: string;
  readonly isMap: boolean;
  /** The declaration as written: `type …` or `typeof …`, up to its `;`. */
  readonly type?: string;
  readonly flags: readonly string[];
  /** Seconds (nft prints "1h" what it was given as "3600s"). */
  readonly timeout?: number;
  readonly size?: number;
  readonly comment?: string;
  readonly elements: NftElement[];
}

export interface NftRule {
  readonly text: string;
  readonly tokens: readonly string[];
}

export interface NftChain {
  readonly name: string;
  readonly hook?: { readonly type: string; readonly hook: string; readonly priority: number };
  readonly policy: 'accept' | 'drop';
  readonly comment?: string;
  rules: NftRule[];
}

export interface NftTable {
  readonly family: string;
  readonly name: string;
  readonly chains: Map<string, NftChain>;
  readonly sets: Map<string, NftSet>;
}

export interface NftRuleset {
  /** Keyed "family name", in the order the tables were created. */
  readonly tables: Map<string, NftTable>;
  /** Lines the parser did not understand: shown by the tracer, never guessed. */
  readonly unknown: string[];
}

const STANDARD_PRIORITIES: Readonly<Record<string, number>> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};

/** Splits nft text into words, quoted strings (kept with their quotes) and `{ } , ; \n` tokens. */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  const pattern = /"(?:[^"\\]|\\.)*"|#[^\n]*|\n|[{},;]|[^\s{},;"]+/g;
  for (const match of text.matchAll(pattern)) {
    if (match[0].startsWith('#')) continue;
    tokens.push(match[0]);
  }
  return tokens;
}

export function unquote(token: string): string {
  return token.startsWith('"') ? token.slice(1, -1).replace(/\\(.)/g, '$1') : token;
}

/** Parses either form (or a mix: a listing then a script); later commands act on earlier state. */
export function parseNftRuleset(text: string): NftRuleset {
  const ruleset = emptyNftRuleset();
  for (const command of parseNftCommands(text)) applyNftCommand(ruleset, command);
  return ruleset;
}

export function emptyNftRuleset(): NftRuleset {
  return { tables: new Map(), unknown: [] };
}

export type NftVerb = 'add' | 'create' | 'insert' | 'delete' | 'destroy' | 'flush';

interface Addressed {
  readonly verb: NftVerb;
  readonly family: string;
  readonly table: string;
}

/**
 * One statement of nft text, with its meaning: what the tracer builds its ruleset from, and what
 * the tests' fake nft checks as the kernel would before applying it (one parser for both).
 */
export type NftCommand =
  | (Addressed & { readonly object: 'table' })
  /** `chain` for add/create (its declaration), absent for flush/delete. */
  | (Addressed & { readonly object: 'chain'; readonly name: string; readonly chain?: NftChain })
  | (Addressed & { readonly object: 'set'; readonly name: string; readonly set?: NftSet })
  /** `index`: `add rule … CHAIN index N` goes after rule N, `insert` before it. */
  | (Addressed & {
      readonly object: 'rule';
      readonly name: string;
      readonly rule: NftRule;
      readonly index?: number;
    })
  | (Addressed & { readonly object: 'element'; readonly name: string; readonly elements: NftElement[] })
  /** A whole table as `nft list ruleset` prints it. */
  | { readonly object: 'listing'; readonly table: NftTable; readonly unknown: readonly string[] }
  | { readonly object: 'unknown'; readonly text: string };

const VERBS: ReadonlySet<string> = new Set(['add', 'create', 'insert', 'delete', 'destroy', 'flush']);

export function parseNftCommands(text: string): NftCommand[] {
  return splitStatements(tokenize(text)).map(commandOf);
}

/** Top-level statements: tokens up to a newline or `;` outside braces, braces kept inside. */
function splitStatements(tokens: readonly string[]): string[][] {
  const statements: string[][] = [];
  let current: string[] = [];
  let depth = 0;
  for (const token of tokens) {
    if (token === '{') depth++;
    if (token === '}') depth--;
    if (depth === 0 && (token === '\n' || token === ';')) {
      if (current.length > 0) statements.push(current);
      current = [];
      continue;
    }
    current.push(token);
  }
  if (current.length > 0) statements.push(current);
  return statements;
}

function commandOf(tokens: readonly string[]): NftCommand {
  const [verb, object, family, table, name] = tokens;
  if (verb === 'table') return listedTable(tokens);
  const unknown: NftCommand = { object: 'unknown', text: tokens.join(' ') };
  if (!VERBS.has(verb ?? '') || family === undefined || table === undefined) return unknown;
  const at = { verb: verb as NftVerb, family, table };
  const isAdd = verb === 'add' || verb === 'create';
  if (object === 'table') return { object, ...at };
  if (name === undefined) return unknown;
  const body = braced(tokens.slice(5));
  switch (object) {
    case 'chain':
      return { object, ...at, name, ...(isAdd && { chain: chainOf(name, splitClauses(body)) }) };
    case 'set':
    case 'map':
      return {
        object: 'set',
        ...at,
        name,
        ...(isAdd && { set: setOf(name, object === 'map', splitClauses(body)) }),
      };
    case 'rule': {
      if (verb !== 'add' && verb !== 'insert') return unknown;
      const indexed = tokens[5] === 'index' && /^\d+$/.test(tokens[6] ?? '');
      const ruleTokens = tokens.slice(indexed ? 7 : 5);
      const rule = { text: ruleTokens.join(' '), tokens: ruleTokens };
      return { object, ...at, name, rule, ...(indexed && { index: Number(tokens[6]) }) };
    }
    case 'element':
      return { object, ...at, name, elements: parseElements(body) };
    default:
      return unknown;
  }
}

/** Applies a command as leniently as a reader must: what it cannot place goes to `unknown`. */
export function applyNftCommand(ruleset: NftRuleset, command: NftCommand): void {
  if (command.object === 'unknown') {
    ruleset.unknown.push(command.text);
    return;
  }
  if (command.object === 'listing') {
    ruleset.tables.set(`${command.table.family} ${command.table.name}`, command.table);
    ruleset.unknown.push(...command.unknown);
    return;
  }
  const { verb, family, table: tableName } = command;
  const key = `${family} ${tableName}`;
  const isAdd = verb === 'add' || verb === 'create' || verb === 'insert';
  const removes = verb === 'delete' || verb === 'destroy';
  if (command.object === 'table') {
    if (isAdd && !ruleset.tables.has(key))
      ruleset.tables.set(key, { family, name: tableName, chains: new Map(), sets: new Map() });
    else if (removes) ruleset.tables.delete(key);
    else if (verb === 'flush') flushTable(ruleset.tables.get(key));
    return;
  }
  const owner = ruleset.tables.get(key);
  const { name } = command;
  const notPlaced = () =>
    ruleset.unknown.push(
      `${verb} ${command.object} ${key} ${name}${command.object === 'rule' ? ` ${command.rule.text}` : ''}`,
    );
  if (owner === undefined) {
    notPlaced();
    return;
  }
  switch (command.object) {
    case 'chain':
      if (command.chain) {
        if (!owner.chains.has(name)) owner.chains.set(name, command.chain);
      } else if (verb === 'flush') {
        const chain = owner.chains.get(name);
        if (chain) chain.rules = [];
      } else if (removes) owner.chains.delete(name);
      return;
    case 'set':
      if (command.set) {
        if (!owner.sets.has(name)) owner.sets.set(name, command.set);
      } else if (verb === 'flush') owner.sets.get(name)?.elements.splice(0);
      else if (removes) owner.sets.delete(name);
      return;
    case 'rule': {
      const chain = owner.chains.get(name);
      if (chain === undefined) {
        notPlaced();
        return;
      }
      const at =
        command.index === undefined
          ? verb === 'insert'
            ? 0
            : chain.rules.length
          : command.index + (verb === 'insert' ? 0 : 1);
      chain.rules.splice(at, 0, command.rule);
      return;
    }
    case 'element': {
      const set = owner.sets.get(name);
      if (set === undefined) {
        notPlaced();
        return;
      }
      if (!removes) {
        // One by one: a spread of a large map's elements (300k at 30k services) overflows the stack.
        for (const element of command.elements) set.elements.push(element);
        return;
      }
      const keys = new Set(command.elements.map(elementKey));
      const kept = set.elements.filter((element) => !keys.has(elementKey(element)));
      set.elements.splice(0, set.elements.length, ...kept);
      return;
    }
  }
}

/** An element's key as one string (`a . b`): how elements are told apart. */
export function elementKey(element: NftElement): string {
  return element.key.join(' . ');
}

function flushTable(table: NftTable | undefined): void {
  for (const chain of table?.chains.values() ?? []) chain.rules = [];
  for (const set of table?.sets.values() ?? []) set.elements.splice(0);
}

/** The tokens inside the first `{ … }` (empty when there is none). */
function braced(tokens: readonly string[]): string[] {
  const open = tokens.indexOf('{');
  if (open < 0) return [];
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    if (tokens[i] === '{') depth++;
    if (tokens[i] === '}' && --depth === 0) return tokens.slice(open + 1, i);
  }
  return tokens.slice(open + 1);
}

/** A block's body split into clauses at `;` and newlines outside nested braces. */
function splitClauses(tokens: readonly string[]): string[][] {
  return splitStatements(tokens);
}

function chainOf(name: string, clauses: readonly string[][]): NftChain {
  let hook: NftChain['hook'];
  let policy: NftChain['policy'] = 'accept';
  let comment: string | undefined;
  const rules: NftRule[] = [];
  for (const clause of clauses) {
    const [first, second] = clause;
    if (first === 'type' && clause[2] === 'hook') {
      const priorityAt = clause.indexOf('priority');
      hook = {
        type: second!,
        hook: clause[3]!,
        priority: priorityOf(clause.slice(priorityAt + 1)),
      };
      const policyAt = clause.indexOf('policy');
      if (policyAt > 0) policy = clause[policyAt + 1] === 'drop' ? 'drop' : 'accept';
    } else if (first === 'policy') policy = second === 'drop' ? 'drop' : 'accept';
    else if (first === 'comment' && clause.length === 2) comment = unquote(second!);
    else rules.push({ text: clause.join(' '), tokens: clause });
  }
  return { name, policy, rules, ...(hook && { hook }), ...(comment !== undefined && { comment }) };
}

/** `dstnat`, `-110`, `filter - 10`, `srcnat + 5` → a number. */
function priorityOf(tokens: readonly string[]): number {
  const [base, sign, offset] = tokens;
  const value = STANDARD_PRIORITIES[base ?? ''] ?? Number(base);
  if (sign === '+' || sign === '-') return value + (sign === '+' ? 1 : -1) * Number(offset);
  return value;
}

function setOf(name: string, isMap: boolean, clauses: readonly string[][]): NftSet {
  let type: string | undefined;
  let flags: string[] = [];
  let timeout: number | undefined;
  let size: number | undefined;
  let comment: string | undefined;
  const elements: NftElement[] = [];
  for (const clause of clauses) {
    const [first, second] = clause;
    if (first === 'type' || first === 'typeof') type = clause.join(' ');
    else if (first === 'flags') flags = clause.slice(1).join('').split(',');
    else if (first === 'timeout') timeout = nftSeconds(second ?? '');
    else if (first === 'size') size = Number(second);
    else if (first === 'comment') comment = unquote(second ?? '');
    else if (first === 'elements')
      for (const element of parseElements(braced(clause))) elements.push(element);
  }
  return {
    name,
    isMap,
    flags,
    elements,
    ...(type !== undefined && { type }),
    ...(timeout !== undefined && { timeout }),
    ...(size !== undefined && { size }),
    ...(comment !== undefined && { comment }),
  };
}

/** `a . b comment "x" : goto c, d . e` → elements (newlines ignored; `,` separates). */
export function parseElements(tokens: readonly string[]): NftElement[] {
  const elements: NftElement[] = [];
  let current: string[] = [];
  const flush = () => {
    if (current.length > 0) elements.push(elementOf(current));
    current = [];
  };
  for (const token of tokens) {
    if (token === '\n') continue;
    if (token === ',') flush();
    else current.push(token);
  }
  flush();
  return elements;
}

/** Words that annotate an element and take one argument (or none for the counter's own words). */
const ELEMENT_ANNOTATIONS = new Set(['comment', 'timeout', 'expires', 'packets', 'bytes']);

function elementOf(tokens: readonly string[]): NftElement {
  const key: string[] = [];
  const value: string[] = [];
  let comment: string | undefined;
  let target = key;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token === ':') target = value;
    else if (token === 'counter') continue;
    else if (ELEMENT_ANNOTATIONS.has(token)) {
      if (token === 'comment') comment = unquote(tokens[i + 1] ?? '');
      i++;
    } else if (token !== '.') target.push(token);
  }
  return {
    key,
    ...(target === value && { value }),
    ...(comment !== undefined && { comment }),
  };
}

/** `table ip kproxy { … }` from `nft list ruleset`: the same objects, nested. */
function listedTable(tokens: readonly string[]): NftCommand {
  const [, family, name] = tokens;
  if (family === undefined || name === undefined) return { object: 'unknown', text: tokens.join(' ') };
  const table: NftTable = { family, name, chains: new Map(), sets: new Map() };
  const unknown: string[] = [];
  for (const clause of splitClauses(braced(tokens))) {
    const [kind, objectName] = clause;
    if (objectName === undefined) continue;
    const body = splitClauses(braced(clause));
    if (kind === 'chain') table.chains.set(objectName, chainOf(objectName, body));
    else if (kind === 'set' || kind === 'map')
      table.sets.set(objectName, setOf(objectName, kind === 'map', body));
    else if (kind !== 'comment' && kind !== 'flags') unknown.push(clause.join(' '));
  }
  return { object: 'listing', table, unknown };
}

const TIME_UNITS: Readonly<Record<string, number>> = { d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 };

/** nft's time text ("3600s", "1h", "1h2m3s", "500ms", "30") → seconds. */
export function nftSeconds(text: string): number {
  if (/^\d+$/.test(text)) return Number(text);
  let seconds = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+)(ms|d|h|m|s)/g))
    seconds += Number(amount) * TIME_UNITS[unit!]!;
  return seconds;
}
