// An nft transaction built in memory with verbs that mirror the nft tool (knftables-style). Its
// string form IS the `nft -f` script: what apply runs, what dry-run prints, what golden files hold.
// Every object lives in one table of its family: `kproxy` unless the constructor names another
// (the IPVS dataplane keeps its companion rules in `kproxy-ipvs`).

export type NftFamily = 'ip' | 'ip6';

export const TABLE = 'kproxy';

export interface BaseChainHook {
  readonly type: 'nat' | 'filter';
  readonly hook: 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';
  /** nft priority text, e.g. "dstnat", "dstnat - 10", "-110". */
  readonly priority: string;
}

export interface ChainSpec {
  readonly name: string;
  readonly comment?: string;
  readonly base?: BaseChainHook;
  /** Rule bodies in order (without `add rule ... CHAIN`). */
  readonly rules: readonly string[];
}

export interface SetSpec {
  readonly name: string;
  readonly kind: 'set' | 'map';
  /** `type ...` or `typeof ...` declaration, e.g. "type ipv4_addr . inet_proto . inet_service : verdict". */
  readonly type: string;
  readonly flags?: readonly string[];
  /** Default element timeout in seconds (dynamic sets). */
  readonly timeoutSeconds?: number;
  /** Most elements (a dynamic set's default is 65535). */
  readonly size?: number;
  readonly comment?: string;
}

export interface ElementSpec {
  readonly key: string;
  /** Map value; absent for a plain set. */
  readonly value?: string;
  readonly comment?: string;
}

export type NftOp =
  | {
      readonly verb: 'add' | 'delete';
      readonly object: 'table';
      readonly family: NftFamily;
      readonly comment?: string;
    }
  | { readonly verb: 'add'; readonly object: 'chain'; readonly family: NftFamily; readonly chain: ChainSpec }
  | {
      readonly verb: 'flush' | 'delete';
      readonly object: 'chain';
      readonly family: NftFamily;
      readonly name: string;
    }
  | { readonly verb: 'add'; readonly object: 'set'; readonly family: NftFamily; readonly set: SetSpec }
  | {
      readonly verb: 'delete' | 'flush';
      readonly object: 'set';
      readonly family: NftFamily;
      readonly kind: 'set' | 'map';
      readonly name: string;
    }
  | {
      readonly verb: 'add';
      readonly object: 'rule';
      readonly family: NftFamily;
      readonly chain: string;
      readonly rule: string;
    }
  | {
      readonly verb: 'add' | 'delete';
      readonly object: 'element';
      readonly family: NftFamily;
      readonly set: string;
      readonly elements: readonly ElementSpec[];
    };

// Identifiers kproxy writes: letters, digits and - _ . / (kube-proxy's chain names use the same).
const NAME = /^[A-Za-z][A-Za-z0-9_./-]*$/;
// nft rejects comments over 128 bytes; quotes cannot be escaped in a comment.
export const MAX_COMMENT = 128;

function checkName(what: string, name: string): void {
  if (!NAME.test(name)) throw new Error(`nft ${what} name ${JSON.stringify(name)} is not a valid identifier`);
}

function quote(comment: string): string {
  if (comment.includes('"') || comment.includes('\n')) {
    throw new Error(`nft comment ${JSON.stringify(comment)} contains a quote or newline`);
  }
  if (Buffer.byteLength(comment) > MAX_COMMENT)
    throw new Error(`nft comment over ${MAX_COMMENT} bytes: ${comment}`);
  return `"${comment}"`;
}

/** A comment cut to what nft accepts (service keys can be longer than 128 bytes). */
export function fitComment(text: string): string {
  let out = text.replaceAll('"', "'");
  while (Buffer.byteLength(out) > MAX_COMMENT) out = out.slice(0, -1);
  return out;
}

export class NftTransaction {
  readonly table: string;
  readonly #ops: NftOp[] = [];

  constructor(table: string = TABLE) {
    checkName('table', table);
    this.table = table;
  }

  get ops(): readonly NftOp[] {
    return this.#ops;
  }

  get empty(): boolean {
    return this.#ops.length === 0;
  }

  addTable(family: NftFamily, comment?: string): this {
    if (comment !== undefined) quote(comment);
    return this.#push({ verb: 'add', object: 'table', family, comment });
  }

  deleteTable(family: NftFamily): this {
    return this.#push({ verb: 'delete', object: 'table', family });
  }

  /** Declares a chain (rules are added separately, so chains can reference each other). */
  addChain(family: NftFamily, chain: ChainSpec): this {
    checkName('chain', chain.name);
    if (chain.comment !== undefined) quote(chain.comment);
    return this.#push({ verb: 'add', object: 'chain', family, chain });
  }

  flushChain(family: NftFamily, name: string): this {
    checkName('chain', name);
    return this.#push({ verb: 'flush', object: 'chain', family, name });
  }

  deleteChain(family: NftFamily, name: string): this {
    checkName('chain', name);
    return this.#push({ verb: 'delete', object: 'chain', family, name });
  }

  addSet(family: NftFamily, set: SetSpec): this {
    checkName(set.kind, set.name);
    if (set.comment !== undefined) quote(set.comment);
    return this.#push({ verb: 'add', object: 'set', family, set });
  }

  deleteSet(family: NftFamily, kind: 'set' | 'map', name: string): this {
    checkName(kind, name);
    return this.#push({ verb: 'delete', object: 'set', family, kind, name });
  }

  /** Removes every element of a set or map. */
  flushSet(family: NftFamily, kind: 'set' | 'map', name: string): this {
    checkName(kind, name);
    return this.#push({ verb: 'flush', object: 'set', family, kind, name });
  }

  addRule(family: NftFamily, chain: string, rule: string): this {
    checkName('chain', chain);
    if (rule.trim() === '' || rule.includes('\n'))
      throw new Error(`nft rule for ${chain} is empty or multi-line`);
    return this.#push({ verb: 'add', object: 'rule', family, chain, rule });
  }

  addElements(family: NftFamily, set: string, elements: readonly ElementSpec[]): this {
    return this.#elements('add', family, set, elements);
  }

  deleteElements(family: NftFamily, set: string, elements: readonly ElementSpec[]): this {
    return this.#elements('delete', family, set, elements);
  }

  /** Appends an operation of another transaction (of the same table): a transaction split in parts. */
  push(op: NftOp): this {
    return this.#push(op);
  }

  /** The `nft -f` script. */
  toString(): string {
    return this.#ops.map((op) => renderOp(op, this.table)).join('');
  }

  /**
   * The same script in pieces that each take little time to render (an operation, or a run of
   * the elements of a large one), so a caller can render it in slices (work-slices.ts).
   */
  *scriptParts(): Generator<string, void, void> {
    for (const op of this.#ops) {
      if (op.object !== 'element' || op.elements.length <= ELEMENTS_PER_PART) {
        yield renderOp(op, this.table);
        continue;
      }
      const render = elementRenderer(op.verb);
      yield `${op.verb} element ${op.family} ${this.table} ${op.set} {\n`;
      for (let i = 0; i < op.elements.length; i += ELEMENTS_PER_PART) {
        yield op.elements
          .slice(i, i + ELEMENTS_PER_PART)
          .map((e) => `\t${render(e)},\n`)
          .join('');
      }
      yield '}\n';
    }
  }

  #elements(verb: 'add' | 'delete', family: NftFamily, set: string, elements: readonly ElementSpec[]): this {
    checkName('set', set);
    if (elements.length === 0) return this;
    for (const e of elements) if (e.comment !== undefined) quote(e.comment);
    return this.#push({ verb, object: 'element', family, set, elements });
  }

  #push(op: NftOp): this {
    this.#ops.push(op);
    return this;
  }
}

function renderOp(op: NftOp, table: string): string {
  const where = `${op.family} ${table}`;
  switch (op.object) {
    case 'table':
      if (op.verb === 'delete' || op.comment === undefined) return `${op.verb} table ${where}\n`;
      return `add table ${where} { comment ${quote(op.comment)} ; }\n`;
    case 'chain':
      if (op.verb !== 'add') return `${op.verb} chain ${where} ${op.name}\n`;
      return `add chain ${where} ${op.chain.name}${chainBody(op.chain)}\n`;
    case 'set':
      if (op.verb !== 'add') return `${op.verb} ${op.kind} ${where} ${op.name}\n`;
      return `add ${op.set.kind} ${where} ${op.set.name} { ${setBody(op.set)} }\n`;
    case 'rule':
      return `add rule ${where} ${op.chain} ${op.rule}\n`;
    case 'element': {
      const render = elementRenderer(op.verb);
      if (op.elements.length === 1)
        return `${op.verb} element ${where} ${op.set} { ${render(op.elements[0]!)} }\n`;
      return `${op.verb} element ${where} ${op.set} {\n${op.elements.map((e) => `\t${render(e)},\n`).join('')}}\n`;
    }
  }
}

/** Elements rendered in one piece by scriptParts(): well under a millisecond's work. */
const ELEMENTS_PER_PART = 1000;

function elementRenderer(verb: 'add' | 'delete'): (e: ElementSpec) => string {
  return verb === 'add' ? renderElement : (e) => e.key;
}

function chainBody(chain: ChainSpec): string {
  const parts: string[] = [];
  if (chain.base) {
    parts.push(`type ${chain.base.type} hook ${chain.base.hook} priority ${chain.base.priority} ;`);
  }
  if (chain.comment !== undefined) parts.push(`comment ${quote(chain.comment)} ;`);
  return parts.length === 0 ? '' : ` { ${parts.join(' ')} }`;
}

function setBody(set: SetSpec): string {
  const parts = [`${set.type} ;`];
  if (set.flags?.length) parts.push(`flags ${set.flags.join(',')} ;`);
  if (set.timeoutSeconds !== undefined) parts.push(`timeout ${set.timeoutSeconds}s ;`);
  if (set.size !== undefined) parts.push(`size ${set.size} ;`);
  if (set.comment !== undefined) parts.push(`comment ${quote(set.comment)} ;`);
  return parts.join(' ');
}

function renderElement(e: ElementSpec): string {
  const comment = e.comment === undefined ? '' : ` comment ${quote(e.comment)}`;
  return e.value === undefined ? `${e.key}${comment}` : `${e.key}${comment} : ${e.value}`;
}
