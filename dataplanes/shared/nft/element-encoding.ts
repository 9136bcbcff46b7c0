// Set and map elements as nf_tables netlink attributes: the bytes nft 1.0.6 sends for the same
// `add element` / `delete element` text (checked against `nft --debug=mnl`, see the tests). The
// element text is the transaction's own (transaction.ts), so the dry-run prints what is written.
//
// A key or value is a concatenation of components. In a concatenation each component takes whole
// 4-byte registers (an address 4 or 16 bytes, a protocol 1 byte and a port 2 bytes each padded to
// 4); a lone component keeps its own length. Addresses and ports are in network order, a mark and
// numgen's index (an integer nft declares in host order) little-endian. Verdicts are
// NFTA_DATA_VERDICT { NFTA_VERDICT_CODE (network order), NFTA_VERDICT_CHAIN }. A concatenated
// interval set (kproxy's firewall-allow: VIP . proto . port . source range) takes each element as
// its first key and its last (NFTA_SET_ELEM_KEY_END).
import type { AttributeWriter } from '../netlink-attributes.ts';
import { type ElementSpec, MAX_COMMENT, type SetSpec } from './transaction.ts';

type Component = 'ipv4' | 'ipv6' | 'proto' | 'service' | 'mark' | 'u32';

/** How a set's elements are encoded; undefined from setLayout() for a set kproxy does not write. */
export interface SetLayout {
  readonly key: readonly Component[];
  /** Absent for a set, 'verdict' for a verdict map. */
  readonly data?: readonly Component[] | 'verdict';
  /** A concatenated interval set: elements carry a key end. */
  readonly interval: boolean;
}

const TYPE_NAMES: Readonly<Record<string, Component>> = {
  ipv4_addr: 'ipv4',
  ipv6_addr: 'ipv6',
  inet_proto: 'proto',
  inet_service: 'service',
  mark: 'mark',
};

/** A `typeof` expression's type, for the expressions kproxy's maps are declared with. */
function expressionType(expression: string): Component | undefined {
  if (/^ip (daddr|saddr)$/.test(expression)) return 'ipv4';
  if (/^ip6 (daddr|saddr)$/.test(expression)) return 'ipv6';
  if (/^(tcp|udp|sctp|th) (dport|sport)$/.test(expression)) return 'service';
  if (expression === 'meta l4proto') return 'proto';
  if (expression === 'meta mark') return 'mark';
  // numgen's value: a 32-bit integer in host order.
  if (/^numgen (random|inc) mod \d+$/.test(expression)) return 'u32';
  return undefined;
}

function components(text: string, typeOf: boolean): Component[] | undefined {
  const out: Component[] = [];
  for (const part of text.trim().split(' . ')) {
    const type = typeOf ? expressionType(part.trim()) : TYPE_NAMES[part.trim()];
    if (type === undefined) return undefined;
    out.push(type);
  }
  return out;
}

/**
 * The layout of `set`'s elements, from its declaration; undefined for what the writer leaves to
 * nft (a type it does not know, a set the packet path fills, a single-component interval set).
 */
export function setLayout(set: SetSpec): SetLayout | undefined {
  const declaration = /^(type|typeof) (.*)$/.exec(set.type);
  if (!declaration) return undefined;
  const flags = set.flags ?? [];
  if (flags.includes('dynamic') || set.timeoutSeconds !== undefined) return undefined;
  if (flags.some((f) => f !== 'interval')) return undefined;
  const typeOf = declaration[1] === 'typeof';
  const [keyText, dataText] = declaration[2]!.split(' : ');
  const key = components(keyText!, typeOf);
  if (!key) return undefined;
  const interval = flags.includes('interval');
  if (interval && (key.length < 2 || set.kind === 'map')) return undefined;
  if (set.kind === 'set') return dataText === undefined ? { key, interval } : undefined;
  if (dataText === undefined) return undefined;
  if (dataText.trim() === 'verdict') return { key, data: 'verdict', interval };
  const data = components(dataText, typeOf);
  return data && { key, data, interval };
}

const LENGTH: Readonly<Record<Component, number>> = {
  ipv4: 4,
  ipv6: 16,
  proto: 1,
  service: 2,
  mark: 4,
  u32: 4,
};
const PROTOCOL_LIST: readonly (readonly [string, number])[] = [
  ['tcp', 6],
  ['udp', 17],
  ['sctp', 132],
];

function size(parts: readonly Component[]): number {
  if (parts.length === 1) return LENGTH[parts[0]!];
  return parts.reduce((sum, c) => sum + ((LENGTH[c] + 3) & ~3), 0);
}

/** Netlink attribute types (linux/netfilter/nf_tables.h). */
const NFTA = {
  LIST_ELEM: 1,
  SET_ELEM_KEY: 1,
  SET_ELEM_DATA: 2,
  SET_ELEM_USERDATA: 6,
  SET_ELEM_KEY_END: 10,
  DATA_VALUE: 1,
  DATA_VERDICT: 2,
  VERDICT_CODE: 1,
  VERDICT_CHAIN: 2,
} as const;
const NLA_F_NESTED = 0x8000;
/** libnftnl's element comment in NFTA_SET_ELEM_USERDATA: a TLV of one-byte type and length. */
const UDATA_SET_ELEM_COMMENT = 0;

const VERDICTS: Readonly<Record<string, number>> = {
  accept: 1,
  drop: 0,
  continue: -1,
  return: -5,
  jump: -3,
  goto: -4,
};

/** Writes one NFTA_LIST_ELEM of `layout` (values parsed from the element's nft text). */
export function writeElement(
  w: AttributeWriter,
  layout: SetLayout,
  element: ElementSpec,
  withData: boolean,
): void {
  const elem = w.begin(NFTA.LIST_ELEM | NLA_F_NESTED);
  writeValue(w, NFTA.SET_ELEM_KEY, layout.key, element.key, 'first', 'key');
  if (layout.interval) writeValue(w, NFTA.SET_ELEM_KEY_END, layout.key, element.key, 'last', 'key');
  if (withData && layout.data !== undefined) {
    if (element.value === undefined) throw new Error(`map element ${element.key} without a value`);
    const data = w.begin(NFTA.SET_ELEM_DATA | NLA_F_NESTED);
    if (layout.data === 'verdict') writeVerdict(w, element.value);
    else writeComponents(w, NFTA.DATA_VALUE, layout.data, element.value, 'first', 'value');
    w.end(data);
  }
  if (withData && element.comment !== undefined) {
    const text = commentBytes(element.comment);
    const at = w.attribute(NFTA.SET_ELEM_USERDATA, 2 + text.length);
    w.setU8(at, UDATA_SET_ELEM_COMMENT);
    w.setU8(at + 1, text.length);
    w.setBytes(at + 2, text);
  }
  w.end(elem);
}

function writeValue(
  w: AttributeWriter,
  type: number,
  layout: readonly Component[],
  text: string,
  end: 'first' | 'last',
  what: 'key' | 'value',
): void {
  const nest = w.begin(type | NLA_F_NESTED);
  writeComponents(w, NFTA.DATA_VALUE, layout, text, end, what);
  w.end(nest);
}

const SEPARATOR = ' . ';

/**
 * The components of `text` (`a . b . c`), each written where `layout` puts it: read in place,
 * not split into strings (a cold start writes hundreds of thousands of elements).
 */
function writeComponents(
  w: AttributeWriter,
  type: number,
  layout: readonly Component[],
  text: string,
  end: 'first' | 'last',
  what: 'key' | 'value',
): void {
  const at = w.attribute(type, size(layout));
  let offset = at;
  const padded = layout.length > 1;
  let from = 0;
  for (let i = 0; i < layout.length; i++) {
    const component = layout[i]!;
    const last = i === layout.length - 1;
    const to = last ? text.length : text.indexOf(SEPARATOR, from);
    if (to < 0 || (last && text.includes(SEPARATOR, from)))
      throw new Error(`element ${what} ${text} does not fit its ${what === 'key' ? 'set' : 'map'}`);
    writeComponent(w, offset, component, text, from, to, end);
    offset += padded ? (LENGTH[component] + 3) & ~3 : LENGTH[component];
    from = to + SEPARATOR.length;
  }
}

function writeComponent(
  w: AttributeWriter,
  at: number,
  component: Component,
  text: string,
  from: number,
  to: number,
  end: 'first' | 'last',
): void {
  switch (component) {
    case 'ipv4':
      w.setU32BE(at, ipv4Value(text, end, from, to));
      return;
    case 'ipv6':
      w.setBytes(at, ipv6PrefixBytes(text.slice(from, to), end));
      return;
    case 'proto': {
      const proto = protocolNumber(text, from, to);
      w.setU8(at, proto);
      return;
    }
    case 'service': {
      const port = integer(text, 0xffff, from, to);
      w.setU8(at, port >>> 8);
      w.setU8(at + 1, port & 0xff);
      return;
    }
    case 'mark':
    case 'u32':
      w.setU32(at, integer(text, 0xffffffff, from, to));
      return;
  }
}

/** A protocol's name (tcp, udp, sctp) or number, read from `text`'s range. */
function protocolNumber(text: string, from: number, to: number): number {
  for (const [name, number] of PROTOCOL_LIST)
    if (to - from === name.length && text.startsWith(name, from)) return number;
  return integer(text, 0xff, from, to);
}

/** Comments met so far, encoded (libnftnl's NUL-terminated text); a map has a few kinds. */
const comments = new Map<string, Uint8Array>();
/** How many comment or verdict texts each cache keeps parsed: past it, that cache starts over. */
const PARSED_TEXTS_KEPT = 4096;

function commentBytes(comment: string): Uint8Array {
  let text = comments.get(comment);
  if (text === undefined) {
    text = Buffer.from(`${comment}\0`, 'utf8');
    // nft's own limit, as the text path checks it; it also keeps the length within its one byte.
    if (text.length - 1 > MAX_COMMENT) throw new Error(`nft comment over ${MAX_COMMENT} bytes: ${comment}`);
    if (comments.size >= PARSED_TEXTS_KEPT) comments.clear();
    comments.set(comment, text);
  }
  return text;
}

/** A decimal integer up to `max` (a loop over the digits: a cold start parses millions). */
function integer(text: string, max: number, from = 0, to = text.length): number {
  let value = 0;
  for (let i = from; i < to; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) throw new Error(`nft element value ${text} is not an integer to ${max}`);
    value = value * 10 + digit;
  }
  if (to === from || value > max) throw new Error(`nft element value ${text} is not an integer to ${max}`);
  return value;
}

/** An IPv4 address, or a prefix's first or last address, as a 32-bit number; `text` from `from` to `to`. */
function ipv4Value(text: string, end: 'first' | 'last', from = 0, to = text.length): number {
  const slash = text.indexOf('/', from);
  const stop = slash < 0 || slash >= to ? to : slash;
  let value = 0;
  let start = from;
  for (let octet = 0; octet < 4; octet++) {
    const dot = octet === 3 ? stop : text.indexOf('.', start);
    if (dot < 0 || dot > stop) throw new Error(`not an IPv4 address: ${text.slice(from, to)}`);
    value = value * 256 + integer(text, 255, start, dot);
    start = dot + 1;
  }
  if (stop === to) return value;
  const prefix = integer(text, 32, stop + 1, to);
  const host = prefix === 0 ? 0xffffffff : 2 ** (32 - prefix) - 1;
  return end === 'last' ? (value | host) >>> 0 : (value & ~host) >>> 0;
}

/** An IPv6 address, or a prefix's first or last address. */
function ipv6PrefixBytes(text: string, end: 'first' | 'last'): Uint8Array {
  const slash = text.indexOf('/');
  const bytes = ipv6Bytes(slash < 0 ? text : text.slice(0, slash));
  if (slash < 0) return bytes;
  const prefix = integer(text, 128, slash + 1);
  for (let bit = prefix; bit < 128; bit++) {
    const mask = 0x80 >>> (bit & 7);
    if (end === 'last') bytes[bit >>> 3]! |= mask;
    else bytes[bit >>> 3]! &= ~mask;
  }
  return bytes;
}

/** An IPv4 or IPv6 address's bytes in network order, as a register holds `ip saddr`. */
export function addressBytes(text: string): Uint8Array {
  return text.includes(':') ? ipv6Bytes(text) : ipv4Bytes(text);
}

function ipv4Bytes(text: string): Uint8Array {
  const value = ipv4Value(text, 'first');
  return Uint8Array.of(value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff);
}

function ipv6Bytes(text: string): Uint8Array {
  const out = new Uint8Array(16);
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const words = (s: string | undefined): number[] => {
    if (!s) return [];
    const groups = s.split(':');
    const last = groups.at(-1)!;
    // An embedded IPv4 address (::ffff:10.0.0.1) is two words.
    if (last.includes('.')) {
      const v4 = ipv4Bytes(last);
      groups.splice(-1, 1, ((v4[0]! << 8) | v4[1]!).toString(16), ((v4[2]! << 8) | v4[3]!).toString(16));
    }
    return groups.map((g) => {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) throw new Error(`not an IPv6 address: ${text}`);
      return Number.parseInt(g, 16);
    });
  };
  const first = words(head);
  const second = words(tail);
  if (tail === undefined ? first.length !== 8 : first.length + second.length > 7)
    throw new Error(`not an IPv6 address: ${text}`);
  const all = [...first, ...new Array<number>(8 - first.length - second.length).fill(0), ...second];
  all.forEach((word, i) => {
    out[2 * i] = word >>> 8;
    out[2 * i + 1] = word & 0xff;
  });
  return out;
}

/** A verdict's code and chain, parsed once per text: a dispatch map's elements share a few. */
const verdicts = new Map<string, { readonly code: number; readonly chain: string | undefined }>();

function parsedVerdict(text: string): { readonly code: number; readonly chain: string | undefined } {
  let verdict = verdicts.get(text);
  if (verdict === undefined) {
    const [word, chain, ...rest] = text.trim().split(/\s+/);
    const code = VERDICTS[word!];
    const needsChain = word === 'jump' || word === 'goto';
    if (code === undefined || rest.length > 0 || needsChain !== (chain !== undefined))
      throw new Error(`nft verdict ${text} is not one the element writer knows`);
    verdict = { code, chain };
    if (verdicts.size >= PARSED_TEXTS_KEPT) verdicts.clear();
    verdicts.set(text, verdict);
  }
  return verdict;
}

function writeVerdict(w: AttributeWriter, text: string): void {
  const { code, chain } = parsedVerdict(text);
  const nest = w.begin(NFTA.DATA_VERDICT | NLA_F_NESTED);
  const at = w.attribute(NFTA.VERDICT_CODE, 4);
  w.setU32BE(at, code);
  if (chain !== undefined) w.string(NFTA.VERDICT_CHAIN, chain);
  w.end(nest);
}
