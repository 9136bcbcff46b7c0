// One nft rule's tokens → the matches and statements the tracer evaluates. Covers the grammar
// kproxy writes (and nft lists back); anything else makes the rule `unknown`, never a guess.
import { type NftElement, parseElements, unquote } from './nft-ruleset.ts';

/** A value the packet carries, numgen's random number, or a jhash of an address the packet carries. */
export type NftExpr =
  | { readonly kind: 'field'; readonly name: string }
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'numgen'; readonly modulus: number; readonly offset: number }
  | {
      readonly kind: 'jhash';
      /** The hashed field: an address (ip saddr, ip6 saddr, ...). */
      readonly field: string;
      readonly modulus: number;
      readonly seed: number;
      readonly offset: number;
    };

export type NftLookup =
  | { readonly kind: 'set'; readonly name: string }
  | { readonly kind: 'anonymous'; readonly elements: readonly NftElement[] }
  | { readonly kind: 'value'; readonly parts: readonly string[] };

export type NftClause =
  | {
      readonly kind: 'match';
      readonly left: readonly NftExpr[];
      readonly negated: boolean;
      readonly mask?: number;
      readonly right: NftLookup;
    }
  | { readonly kind: 'vmap'; readonly left: readonly NftExpr[]; readonly map: NftLookup }
  | { readonly kind: 'verdict'; readonly verdict: 'accept' | 'drop' | 'reject' | 'return' | 'continue' }
  | { readonly kind: 'jump' | 'goto'; readonly chain: string }
  | {
      readonly kind: 'dnat';
      readonly to:
        | { readonly left: readonly NftExpr[]; readonly map: NftLookup }
        | { readonly address: string }
        /** `dnat ip to ip daddr : <key> map @m`: the address the header holds, the port from a map. */
        | {
            readonly field: string;
            readonly port: { readonly left: readonly NftExpr[]; readonly map: NftLookup };
          };
    }
  | { readonly kind: 'masquerade' }
  | { readonly kind: 'snat'; readonly address: string }
  | { readonly kind: 'mark'; readonly operation: 'or' | 'xor' | 'and' | 'set'; readonly value: number }
  | {
      readonly kind: 'update';
      readonly set: string;
      readonly left: readonly NftExpr[];
      readonly timeout?: string;
    }
  /** `tcp dport set 1`, `ip daddr set ct original ip daddr`, `… set <concat> map @m`: payload rewritten. */
  | {
      readonly kind: 'set-field';
      readonly field: string;
      readonly value: readonly NftExpr[];
      readonly map?: NftLookup;
    };

export type ParsedRule =
  | { readonly ok: true; readonly clauses: readonly NftClause[]; readonly comment?: string }
  | { readonly ok: false; readonly reason: string };

/** `<protocol> <field>` pairs a selector may start with. */
const FIELDS: Readonly<Record<string, readonly string[]>> = {
  ip: ['saddr', 'daddr', 'protocol'],
  ip6: ['saddr', 'daddr', 'nexthdr'],
  meta: ['l4proto', 'mark', 'nfproto'],
  th: ['dport', 'sport'],
  tcp: ['dport', 'sport'],
  udp: ['dport', 'sport'],
  sctp: ['dport', 'sport'],
  ct: ['state', 'status'],
};

const VERDICTS = new Set(['accept', 'drop', 'reject', 'return', 'continue']);
const MARK_OPERATIONS: Readonly<Record<string, 'or' | 'xor' | 'and'>> = {
  or: 'or',
  '|': 'or',
  xor: 'xor',
  '^': 'xor',
  and: 'and',
  '&': 'and',
};

class RuleReader {
  private at = 0;
  private readonly tokens: string[];
  constructor(tokens: readonly string[]) {
    this.tokens = [...tokens];
  }
  /** A listing prints `ip daddr:ct …` as one word: splits the current one at its `:`. */
  splitColon(): void {
    const token = this.peek();
    const at = token?.indexOf(':') ?? -1;
    if (token === undefined || at <= 0 || at === token.length - 1) return;
    this.tokens.splice(this.at, 1, token.slice(0, at), ':', token.slice(at + 1));
  }
  peek(offset = 0): string | undefined {
    return this.tokens[this.at + offset];
  }
  next(): string {
    const token = this.tokens[this.at++];
    if (token === undefined) throw new UnknownRule('rule ends early');
    return token;
  }
  expect(token: string): void {
    const got = this.next();
    if (got !== token) throw new UnknownRule(`expected ${token}, found ${got}`);
  }
  skip(count: number): void {
    for (let i = 0; i < count; i++) this.next();
  }
  /** `a . b . c` from here: the words between the dots. */
  dotted(): string[] {
    const parts = [this.next()];
    while (this.peek() === '.') {
      this.next();
      parts.push(this.next());
    }
    return parts;
  }
  done(): boolean {
    return this.at >= this.tokens.length;
  }
  /** Tokens of a `{ … }` block, the braces consumed. */
  block(): string[] {
    this.expect('{');
    const inside: string[] = [];
    let depth = 1;
    for (;;) {
      const token = this.next();
      if (token === '{') depth++;
      if (token === '}' && --depth === 0) return inside;
      inside.push(token);
    }
  }
}

class UnknownRule extends Error {}

export function parseRule(tokens: readonly string[]): ParsedRule {
  const reader = new RuleReader(tokens);
  const clauses: NftClause[] = [];
  let comment: string | undefined;
  try {
    while (!reader.done()) {
      const token = reader.peek()!;
      if (token === 'counter') {
        reader.next();
        while (reader.peek() === 'packets' || reader.peek() === 'bytes') reader.skip(2);
      } else if (token === 'comment') {
        reader.next();
        comment = unquote(reader.next());
      } else if (VERDICTS.has(token)) {
        reader.next();
        clauses.push({ kind: 'verdict', verdict: token as 'accept' });
        // `reject with icmp type port-unreachable` and the like: the kind of reject does not matter here.
        if (token === 'reject' && reader.peek() === 'with') while (!reader.done()) reader.next();
      } else if (token === 'jump' || token === 'goto') {
        reader.next();
        clauses.push({ kind: token, chain: reader.next() });
      } else if (token === 'dnat') clauses.push(readDnat(reader));
      else if (token === 'snat') {
        reader.next();
        if (reader.peek() === 'ip' || reader.peek() === 'ip6') reader.next();
        reader.expect('to');
        clauses.push({ kind: 'snat', address: reader.next() });
      } else if (token === 'masquerade') {
        reader.next();
        while (['fully-random', 'random', 'persistent'].includes(reader.peek() ?? '')) reader.next();
        clauses.push({ kind: 'masquerade' });
      } else if (token === 'update' || token === 'add') {
        reader.next();
        const set = reader.next();
        if (!set.startsWith('@')) throw new UnknownRule(`${token} ${set}`);
        const inside = new RuleReader(reader.block());
        const left = readConcat(inside);
        let timeout: string | undefined;
        if (inside.peek() === 'timeout') {
          inside.next();
          timeout = inside.next();
        }
        clauses.push({ kind: 'update', set: set.slice(1), left, ...(timeout !== undefined && { timeout }) });
      } else if (token === 'meta' && reader.peek(1) === 'mark' && reader.peek(2) === 'set') {
        clauses.push(readMarkSet(reader));
      } else clauses.push(readMatch(reader));
    }
  } catch (error) {
    if (error instanceof UnknownRule) return { ok: false, reason: error.message };
    throw error;
  }
  return { ok: true, clauses, ...(comment !== undefined && { comment }) };
}

function readExpr(reader: RuleReader): NftExpr {
  const first = reader.next();
  if (first === 'numgen') {
    reader.expect('random');
    reader.expect('mod');
    const modulus = Number(reader.next());
    let offset = 0;
    if (reader.peek() === 'offset') {
      reader.next();
      offset = Number(reader.next());
    }
    return { kind: 'numgen', modulus, offset };
  }
  if (first === 'jhash') return readJhash(reader);
  if (first === 'ct' && reader.peek() === 'original') {
    // ct original ip daddr / ct original proto-dst: the connection's destination before any NAT.
    reader.next();
    const what = reader.next();
    if (what === 'proto-dst') return { kind: 'field', name: 'ct original proto-dst' };
    const direction = reader.next();
    if ((what !== 'ip' && what !== 'ip6') || (direction !== 'daddr' && direction !== 'saddr'))
      throw new UnknownRule(`ct original ${what} ${direction}`);
    return { kind: 'field', name: `ct original ${what} ${direction}` };
  }
  if (first === 'fib') {
    // fib saddr [. iif] type
    const parts = reader.dotted();
    reader.expect('type');
    return { kind: 'field', name: `fib ${parts[0]} type` };
  }
  const second = reader.next();
  if (!FIELDS[first]?.includes(second)) throw new UnknownRule(`selector ${first} ${second}`);
  return { kind: 'field', name: `${first} ${second}` };
}

/** `jhash <address field> mod N [seed S] [offset O]`; only an address is hashed in kproxy's rules. */
function readJhash(reader: RuleReader): NftExpr {
  const field = readExpr(reader);
  if (field.kind !== 'field' || !/^ip6? (saddr|daddr)$/.test(field.name))
    throw new UnknownRule('jhash of a non-address');
  reader.expect('mod');
  const modulus = Number(reader.next());
  // Without a seed the kernel draws one at random: not predictable, so not traced.
  if (reader.peek() !== 'seed') throw new UnknownRule('jhash without a seed');
  reader.next();
  const seed = Number(reader.next());
  let offset = 0;
  if (reader.peek() === 'offset') {
    reader.next();
    offset = Number(reader.next());
  }
  return { kind: 'jhash', field: field.name, modulus, seed, offset };
}

function readConcat(reader: RuleReader): NftExpr[] {
  const exprs = [readExpr(reader)];
  while (reader.peek() === '.') {
    reader.next();
    exprs.push(readExpr(reader));
  }
  return exprs;
}

function readLookup(reader: RuleReader): NftLookup {
  const token = reader.peek();
  if (token === undefined) throw new UnknownRule('lookup missing');
  if (token.startsWith('@')) {
    reader.next();
    return { kind: 'set', name: token.slice(1) };
  }
  if (token === '{') return { kind: 'anonymous', elements: parseElements(reader.block()) };
  return { kind: 'value', parts: reader.dotted() };
}

/** A value: a selector, numgen or a literal, concatenated with ` . `. */
function readValueConcat(reader: RuleReader): NftExpr[] {
  const exprs: NftExpr[] = [];
  do {
    if (exprs.length > 0) reader.next();
    const token = reader.peek() ?? '';
    exprs.push(SELECTOR_STARTS.has(token) ? readExpr(reader) : { kind: 'literal', text: reader.next() });
  } while (reader.peek() === '.');
  return exprs;
}

/** Payload fields the tracer can rewrite (`… set …`). */
const WRITABLE_FIELD = /^(ip6? (daddr|saddr)|(th|tcp|udp|sctp) (dport|sport))$/;

const SELECTOR_STARTS = new Set([...Object.keys(FIELDS), 'numgen', 'jhash', 'fib']);

function readMatch(reader: RuleReader): NftClause {
  const left = readConcat(reader);
  if (reader.peek() === 'set' && left.length === 1 && left[0]!.kind === 'field') {
    if (!WRITABLE_FIELD.test(left[0]!.name)) throw new UnknownRule(`${left[0]!.name} set`);
    reader.next();
    const value = readValueConcat(reader);
    if (reader.peek() !== 'map') return { kind: 'set-field', field: left[0]!.name, value };
    reader.next();
    return { kind: 'set-field', field: left[0]!.name, value, map: readLookup(reader) };
  }
  let negated = false;
  let mask: number | undefined;
  if (reader.peek() === 'vmap') {
    reader.next();
    return { kind: 'vmap', left, map: readLookup(reader) };
  }
  if (reader.peek() === '&') {
    reader.next();
    mask = Number(reader.next());
  }
  if (reader.peek() === '==' || reader.peek() === '!=') negated = reader.next() === '!=';
  const right = readLookup(reader);
  return { kind: 'match', left, negated, right, ...(mask !== undefined && { mask }) };
}

function readMarkSet(reader: RuleReader): NftClause {
  reader.skip(3); // meta mark set
  if (reader.peek() === 'meta' && reader.peek(1) === 'mark') {
    reader.skip(2);
    const operation = MARK_OPERATIONS[reader.next()];
    if (operation === undefined) throw new UnknownRule('mark operation');
    return { kind: 'mark', operation, value: Number(reader.next()) };
  }
  return { kind: 'mark', operation: 'set', value: Number(reader.next()) };
}

function readDnat(reader: RuleReader): NftClause {
  reader.next();
  if (reader.peek() === 'ip' || reader.peek() === 'ip6') {
    // `dnat ip to …` (family) versus `dnat ip daddr …`: only the first names a family.
    if (reader.peek(1) === 'to') reader.next();
  }
  reader.expect('to');
  const start = reader.peek();
  if (start === undefined) throw new UnknownRule('dnat target missing');
  if (/^[\d[]/.test(start) && reader.peek(1) !== '.') return { kind: 'dnat', to: { address: reader.next() } };
  const address = `${reader.peek(1)} ${reader.peek(2)}`;
  if ((start === 'ip' || start === 'ip6') && (address === 'daddr :' || address.startsWith('daddr:'))) {
    reader.next();
    reader.splitColon();
    reader.expect('daddr');
    reader.expect(':');
    const left = readConcat(reader);
    reader.expect('map');
    return { kind: 'dnat', to: { field: `${start} daddr`, port: { left, map: readLookup(reader) } } };
  }
  const left = readConcat(reader);
  reader.expect('map');
  return { kind: 'dnat', to: { left, map: readLookup(reader) } };
}
