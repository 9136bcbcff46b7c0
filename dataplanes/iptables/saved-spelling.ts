// A rule of kproxy's render, spelled as iptables-save (1.8.9, nft and legacy alike) lists it once
// restored: the drift report (drift.ts) compares the render with what the node holds in that one
// spelling, without restoring the render anywhere (the packaged unit may make no scratch network
// namespace). The render itself stays kube-proxy's text rule for rule; only the comparison needs this.
//
// iptables-save prints the addresses, interfaces and protocol first (-s -d -i -o -p, a `!` before
// each it inverts), every address with its mask (/32, or the mask itself when not a prefix; none for
// /0), then the matches in the order given, each module's options in its own order with the
// defaults it keeps filled in, then the target likewise. Only the modules and options kproxy
// renders are known; any other is a render this file was not taught, and throws (the kernel test,
// test/dataplanes/iptables/saved-spelling-kernel.test.ts, restores every rule shape and compares).
import ipaddr from 'ipaddr.js';
import type { IPFamily } from '../../contract/base/ip-family.ts';

interface Option {
  readonly inverted: boolean;
  readonly name: string;
  readonly values: string[];
}

interface Extension {
  /** The module after -m, the target after -j. */
  readonly name: string;
  readonly options: Option[];
}

/** The header options in iptables-save's order. */
const HEADER = ['-s', '-d', '-i', '-o', '-p'] as const;
type HeaderOption = (typeof HEADER)[number];

/** Each module's options in the order its save function prints them (libxt_*.c). */
const MATCH_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  comment: ['--comment'],
  tcp: ['--sport', '--dport'],
  udp: ['--sport', '--dport'],
  sctp: ['--sport', '--dport'],
  addrtype: ['--src-type', '--dst-type'],
  conntrack: ['--ctstate'],
  mark: ['--mark'],
  nfacct: ['--nfacct-name'],
  statistic: ['--mode', '--probability'],
  recent: [
    '--set',
    '--rcheck',
    '--update',
    '--remove',
    '--seconds',
    '--reap',
    '--name',
    '--mask',
    '--rsource',
  ],
};

/** Each target's options in its save function's order. */
const TARGET_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  DNAT: ['--to-destination'],
  MARK: ['--set-xmark'],
  MASQUERADE: ['--random-fully'],
  REJECT: ['--reject-with'],
};

/** libxt_conntrack prints a state list in this order, whatever order it was given in. */
const CONNTRACK_STATES = ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'UNTRACKED', 'SNAT', 'DNAT'];

/** `rule`'s words after `-A CHAIN`, as iptables-save prints them (words, so quoting aside). */
export function savedSpelling(family: IPFamily, rule: readonly string[]): string[] {
  const header = new Map<HeaderOption, Option>();
  const matches: Extension[] = [];
  let target: Extension | undefined;
  const fail = (why: string): never => {
    throw new Error(`no iptables-save spelling known for "${rule.join(' ')}": ${why}`);
  };
  for (let at = 0; at < rule.length; ) {
    const inverted = rule[at] === '!';
    if (inverted) at++;
    const word = rule[at++] ?? fail('a `!` at the end');
    if ((HEADER as readonly string[]).includes(word)) {
      header.set(word as HeaderOption, { inverted, name: word, values: [rule[at++] ?? fail(word)] });
    } else if (word === '-m' || word === '-j') {
      if (inverted) fail(`a \`!\` before ${word}`);
      const extension = { name: rule[at++] ?? fail(word), options: [] };
      if (word === '-m') matches.push(extension);
      else target = extension;
    } else if (word.startsWith('--')) {
      const values: string[] = [];
      while (at < rule.length && rule[at] !== '!' && !rule[at]!.startsWith('-')) values.push(rule[at++]!);
      (target ?? matches.at(-1) ?? fail(`${word} outside a match or target`)).options.push({
        inverted,
        name: word,
        values,
      });
    } else fail(`unexpected ${word}`);
  }
  const out: string[] = [];
  for (const name of HEADER) {
    const option = header.get(name);
    if (option === undefined) continue;
    const value =
      name === '-s' || name === '-d' ? savedNetwork(family, option.values[0]!) : option.values[0]!;
    // A /0 network matches every address: iptables-save leaves it out.
    if (value.endsWith('/0') && !option.inverted) continue;
    out.push(...(option.inverted ? ['!'] : []), name, value);
  }
  for (const match of matches) {
    const order = MATCH_OPTIONS[match.name] ?? fail(`module ${match.name}`);
    out.push('-m', match.name, ...savedOptions(order, savedMatchOptions(family, match), fail));
  }
  if (target !== undefined) {
    const options = savedTargetOptions(family, target);
    const order = TARGET_OPTIONS[target.name] ?? (options.length === 0 ? [] : fail(`target ${target.name}`));
    out.push('-j', target.name, ...savedOptions(order, options, fail));
  }
  return out;
}

function savedOptions(order: readonly string[], options: readonly Option[], fail: (why: string) => never) {
  for (const { name } of options) if (!order.includes(name)) fail(`option ${name}`);
  return [...options]
    .sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name))
    .flatMap(({ inverted, name, values }) => [...(inverted ? ['!'] : []), name, ...values]);
}

function savedMatchOptions(family: IPFamily, { name, options }: Extension): Option[] {
  const valued = (option: Option, spell: (value: string) => string) => ({
    ...option,
    values: option.values.map(spell),
  });
  switch (name) {
    case 'statistic':
      return options.map((o) => (o.name === '--probability' ? valued(o, savedProbability) : o));
    case 'conntrack':
      return options.map((o) => (o.name === '--ctstate' ? valued(o, savedStates) : o));
    case 'mark':
      return options.map((o) => valued(o, (value) => savedMark(value.split('/'))));
    case 'recent': {
      // The address mask and the source address are its defaults, and listed.
      const has = (option: string) => options.some((o) => o.name === option);
      const defaults = [
        ...(has('--mask') ? [] : [{ inverted: false, name: '--mask', values: [fullMask(family)] }]),
        ...(has('--rsource') ? [] : [{ inverted: false, name: '--rsource', values: [] }]),
      ];
      return [...options, ...defaults];
    }
    default:
      return options;
  }
}

function savedTargetOptions(family: IPFamily, { name, options }: Extension): Option[] {
  switch (name) {
    case 'MARK':
      // libxt_MARK keeps every mark operation as "zero the mask's bits, then xor the value".
      return options.map(({ name: option, values: [value = ''] }) => {
        if (option === '--or-mark') return markOption(value, value);
        if (option === '--xor-mark') return markOption(value, '0');
        if (option === '--set-mark') return markOption(value, '0xffffffff');
        return markOption(...(value.split('/') as [string, string]));
      });
    case 'DNAT':
      return options.map((o) => ({ ...o, values: o.values.map((value) => savedDestination(family, value)) }));
    case 'REJECT':
      return options.length > 0
        ? options
        : [
            {
              inverted: false,
              name: '--reject-with',
              values: [family === 'IPv4' ? 'icmp-port-unreachable' : 'icmp6-port-unreachable'],
            },
          ];
    default:
      return options;
  }
}

function markOption(value: string, mask: string): Option {
  return { inverted: false, name: '--set-xmark', values: [savedMark([value, mask])] };
}

/** `0x4000/0x4000`: hexadecimal, the mask left out when it is every bit. */
function savedMark([value = '', mask]: readonly string[]): string {
  const hex = (text: string) => `0x${(Number(text) >>> 0).toString(16)}`;
  return mask === undefined || Number(mask) >>> 0 === 0xffffffff ? hex(value) : `${hex(value)}/${hex(mask)}`;
}

function savedStates(list: string): string {
  const states = list.split(',');
  for (const state of states)
    if (!CONNTRACK_STATES.includes(state))
      throw new Error(`no iptables-save spelling known for state ${state}`);
  return CONNTRACK_STATES.filter((state) => states.includes(state)).join(',');
}

/**
 * libxt_statistic keeps lround(p × 2³¹) and prints that over 2³¹ with %.11f: computed exactly
 * (the fraction has 31 binary digits) and rounded as glibc's printf rounds, half to even.
 */
function savedProbability(text: string): string {
  const kept = BigInt(Math.round(Number(text) * 0x80000000));
  const scaled = kept * 10n ** 11n;
  const whole = scaled >> 31n;
  const twice = (scaled - (whole << 31n)) * 2n;
  const up = twice > 1n << 31n || (twice === 1n << 31n && whole % 2n === 1n);
  const digits = (whole + (up ? 1n : 0n)).toString().padStart(12, '0');
  return `${digits.slice(0, -11)}.${digits.slice(-11)}`;
}

function fullMask(family: IPFamily): string {
  return family === 'IPv4' ? '255.255.255.255' : 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff';
}

/** An address or network of -s/-d: the address under its mask, then /prefix or /mask. */
function savedNetwork(family: IPFamily, text: string): string {
  const slash = text.indexOf('/');
  const address = ipaddr.parse(slash < 0 ? text : text.slice(0, slash)).toByteArray();
  const bits = address.length * 8;
  const maskText = slash < 0 ? String(bits) : text.slice(slash + 1);
  const mask = /^\d+$/.test(maskText)
    ? address.map((_, i) => (0xff00 >> Math.min(8, Math.max(0, Number(maskText) - 8 * i))) & 0xff)
    : ipaddr.parse(maskText).toByteArray();
  if (address.length !== (family === 'IPv4' ? 4 : 16) || mask.length !== address.length)
    throw new Error(`no iptables-save spelling known for ${family} network ${text}`);
  const network = printAddress(address.map((byte, i) => byte & mask[i]!));
  const prefix = prefixLength(mask);
  return `${network}/${prefix ?? printAddress(mask)}`;
}

/** The mask's prefix length, or undefined when its ones are not all leading. */
function prefixLength(mask: readonly number[]): number | undefined {
  const bits = mask.map((byte) => byte.toString(2).padStart(8, '0')).join('');
  const ones = bits.indexOf('0') < 0 ? bits.length : bits.indexOf('0');
  return bits.slice(ones).includes('1') ? undefined : ones;
}

/** DNAT's `ADDRESS:PORT` or `[ADDRESS]:PORT`, its address as inet_ntop prints it. */
function savedDestination(family: IPFamily, text: string): string {
  const match = family === 'IPv4' ? /^([^:]+)(:.*)?$/.exec(text) : /^\[([^\]]+)\](:.*)?$/.exec(text);
  if (match === null) throw new Error(`no iptables-save spelling known for --to-destination ${text}`);
  const address = printAddress(ipaddr.parse(match[1]!).toByteArray());
  return `${family === 'IPv4' ? address : `[${address}]`}${match[2] ?? ''}`;
}

/**
 * glibc's inet_ntop: IPv4 dotted; IPv6 in lower-case hex groups, the first longest run of two or
 * more zero groups as `::`, and the last 32 bits dotted after six zero groups or ::ffff:
 * (ipaddr.js never writes those dotted, hence this).
 */
function printAddress(bytes: readonly number[]): string {
  if (bytes.length === 4) return bytes.join('.');
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    const start = i;
    while (i < 8 && groups[i] === 0) i++;
    if (i - start > best.length) best = { start, length: i - start };
  }
  if (best.length < 2) best = { start: -1, length: 0 };
  let text = '';
  for (let i = 0; i < 8; i++) {
    if (i >= best.start && i < best.start + best.length) {
      if (i === best.start) text += ':';
      continue;
    }
    if (i !== 0) text += ':';
    if (i === 6 && best.start === 0 && (best.length === 6 || (best.length === 5 && groups[5] === 0xffff))) {
      text += bytes.slice(12).join('.');
      break;
    }
    text += groups[i]!.toString(16);
  }
  if (best.start !== -1 && best.start + best.length === 8) text += ':';
  return text;
}
