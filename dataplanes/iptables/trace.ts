// The iptables tracer: walks a packet through iptables rule text (restore input or
// iptables-save output) table by table at each hook, forking at `-m statistic`. kproxy's chains
// (KPROXY-*) are evaluated; other rules in the built-in chains are named as not evaluated.

import {
  type Flow,
  type HookEvaluator,
  type HookName,
  serviceOfComment,
  walkHooks,
  withStep,
} from '../shared/trace/flow.ts';
import { valueMatches } from '../shared/trace/match-value.ts';
import { dnatTo, parseHostPort } from '../shared/trace/nft.ts';
import type { TraceReport, TraceStep } from '../shared/trace/outcome.ts';
import { isLocalAddress, packetFamily, type TraceHost, type TracePacket } from '../shared/trace/packet.ts';
import {
  BUILT_IN_CHAINS,
  type IptablesChain,
  type IptablesRuleset,
  type IptablesTables,
} from './trace-ruleset.ts';

/** The tables at each hook, in the kernel's priority order. */
const HOOK_TABLES: Readonly<Record<HookName, readonly string[]>> = {
  prerouting: ['raw', 'mangle', 'nat'],
  input: ['mangle', 'filter', 'security', 'nat'],
  forward: ['mangle', 'filter', 'security'],
  output: ['raw', 'mangle', 'nat', 'filter', 'security'],
  postrouting: ['mangle', 'nat'],
};

const OWN_CHAIN = /^KPROXY-/;

interface Rule {
  readonly matches: readonly Match[];
  readonly target?: string;
  readonly targetOptions: Readonly<Record<string, string>>;
  readonly goto: boolean;
  readonly comment?: string;
}

type Match =
  | {
      readonly kind: 'test';
      readonly negated: boolean;
      readonly test: (flow: Flow, host: TraceHost) => boolean;
    }
  | { readonly kind: 'random'; readonly probability: number }
  | { readonly kind: 'recent-check'; readonly name: string };

type Control = 'end' | 'accept' | 'stop';

export interface IptablesTraceOptions {
  /** Evaluate other owners' rules in the built-in chains too (`kproxy diff` asks which hit a Service). */
  readonly foreignRules?: boolean;
}

export function traceIptables(
  ruleset: IptablesRuleset,
  packet: TracePacket,
  host: TraceHost,
  options: IptablesTraceOptions = {},
): TraceReport {
  const tables = ruleset[packetFamily(packet)];
  const skipped = new Set(ruleset.unknown.map((line) => `not understood: ${line}`));
  const evaluate: HookEvaluator = (hook, flow) =>
    HOOK_TABLES[hook].reduce<readonly Flow[]>(
      (flows, tableName) => {
        const chain = tables.get(tableName)?.get(hook.toUpperCase());
        if (chain === undefined) return flows;
        const walker = new ChainWalker(tables, tableName, hook, host, skipped, options.foreignRules === true);
        return flows.flatMap((current) => (current.verdict ? [current] : walker.runBuiltIn(chain, current)));
      },
      [flow],
    );
  const branches = walkHooks(packet, host, evaluate);
  return { mode: 'iptables', packet, branches, notEvaluated: [...skipped] };
}

/**
 * Each rule's text and parse, kept with its words: `kproxy diff` traces every Service port through
 * the same rules (60,000 traces at 30,000 Services), and parsing them again each time was most of
 * a trace. Rule words are never changed in place (a replaced rule is a new array).
 */
const parsedRules = new WeakMap<
  readonly string[],
  { readonly text: string; readonly rule: Rule | undefined }
>();

function parsedRule(chain: string, words: readonly string[]): { text: string; rule: Rule | undefined } {
  let parsed = parsedRules.get(words);
  if (parsed === undefined) {
    const text = `-A ${chain} ${words.map((word) => (/\s/.test(word) ? JSON.stringify(word) : word)).join(' ')}`;
    parsed = { text, rule: parseRule(words) };
    parsedRules.set(words, parsed);
  }
  return parsed;
}

class ChainWalker {
  private readonly tables: IptablesTables;
  private readonly table: string;
  private readonly hook: HookName;
  private readonly host: TraceHost;
  private readonly skipped: Set<string>;
  private readonly foreignRules: boolean;

  constructor(
    tables: IptablesTables,
    table: string,
    hook: HookName,
    host: TraceHost,
    skipped: Set<string>,
    foreignRules: boolean,
  ) {
    this.tables = tables;
    this.table = table;
    this.hook = hook;
    this.host = host;
    this.skipped = skipped;
    this.foreignRules = foreignRules;
  }

  runBuiltIn(chain: IptablesChain, flow: Flow): Flow[] {
    const name = this.hook.toUpperCase();
    return this.runChain(name, chain, flow).map(({ flow: after, control }) =>
      control === 'end' && chain.policy === 'DROP'
        ? { ...after, verdict: { kind: 'drop' as const, rule: `policy DROP of ${this.table} ${name}` } }
        : after,
    );
  }

  private runChain(name: string, chain: IptablesChain, flow: Flow): { flow: Flow; control: Control }[] {
    const entered = BUILT_IN_CHAINS.has(name) ? flow : withStep(flow, this.step(name, 'chain', name));
    return this.runRules(name, chain, 0, entered);
  }

  private runRules(
    name: string,
    chain: IptablesChain,
    index: number,
    flow: Flow,
  ): { flow: Flow; control: Control }[] {
    const words = chain.rules[index];
    if (words === undefined) return [{ flow, control: 'end' }];
    const { text, rule } = parsedRule(name, words);
    const continueWith = (current: Flow) => this.runRules(name, chain, index + 1, current);
    const theirs = !this.foreignRules && BUILT_IN_CHAINS.has(name) && !OWN_CHAIN.test(rule?.target ?? '');
    if (rule === undefined || theirs) {
      const reason = theirs ? "not kproxy's rule" : 'not understood';
      this.skipped.add(`${this.table}: ${text} (${reason})`);
      return continueWith(
        withStep(flow, { ...this.step(name, 'unknown', text), note: `not evaluated: ${reason}` }),
      );
    }
    return this.matchAll(rule, flow).flatMap(({ flow: current, matched }) =>
      matched ? this.apply(name, chain, index, rule, text, current) : continueWith(current),
    );
  }

  /** Forks at `-m statistic`: the matching and the missing share, each with its probability. */
  private matchAll(rule: Rule, flow: Flow): { flow: Flow; matched: boolean }[] {
    let results = [{ flow, matched: true }];
    for (const match of rule.matches) {
      results = results.flatMap((result) => {
        if (!result.matched) return [result];
        if (match.kind === 'random') {
          const p = match.probability;
          const scaled = (share: number) => ({
            ...result.flow,
            probability: result.flow.probability * share,
          });
          return [
            ...(p > 0 ? [{ flow: scaled(p), matched: true }] : []),
            ...(p < 1 ? [{ flow: scaled(1 - p), matched: false }] : []),
          ];
        }
        // Affinity lists start empty: the trace is of a client's first connection.
        if (match.kind === 'recent-check') return [{ ...result, matched: false }];
        return [{ ...result, matched: match.test(result.flow, this.host) !== match.negated }];
      });
    }
    return results;
  }

  private apply(
    name: string,
    chain: IptablesChain,
    index: number,
    rule: Rule,
    text: string,
    matched: Flow,
  ): { flow: Flow; control: Control }[] {
    const flow = withStep(matched, this.step(name, 'rule', text, rule.comment));
    const continueWith = (current: Flow) => this.runRules(name, chain, index + 1, current);
    const options = rule.targetOptions;
    const where = `${this.table} ${name}: ${rule.comment ?? text}`;
    switch (rule.target) {
      case undefined:
        return continueWith(flow);
      case 'ACCEPT':
        return [{ flow, control: 'accept' }];
      case 'DROP':
      case 'REJECT':
        return [
          {
            flow: { ...flow, verdict: { kind: rule.target === 'DROP' ? 'drop' : 'reject', rule: where } },
            control: 'stop',
          },
        ];
      case 'RETURN':
        return [{ flow, control: 'end' }];
      case 'DNAT': {
        const target = parseHostPort(options['--to-destination'] ?? '', flow.port);
        const recent = this.recentNote(rule, flow);
        return [
          { flow: { ...dnatTo(flow, target), ...(recent && { affinity: recent }) }, control: 'accept' },
        ];
      }
      case 'MASQUERADE':
      case 'SNAT': {
        const masquerade = {
          rule: `${this.table} ${name}: ${text}`,
          ...(flow.markedBy && { requestedBy: flow.markedBy }),
        };
        return [{ flow: { ...flow, masquerade }, control: 'accept' }];
      }
      case 'MARK': {
        const mark = markAfter(flow.mark, options);
        const gained = (mark & ~flow.mark) !== 0;
        const markedBy = gained ? (flow.lastJump ?? `${name}: ${text}`) : flow.markedBy;
        return continueWith({ ...flow, mark, ...(markedBy && { markedBy }) });
      }
    }
    const target = this.tables.get(this.table)?.get(rule.target);
    if (target === undefined) {
      this.skipped.add(`${this.table}: ${text} (target ${rule.target} not understood)`);
      return continueWith(flow);
    }
    const called = { ...flow, lastJump: `${name}: ${rule.comment ?? text}` };
    const paths = this.runChain(rule.target, target, called);
    if (rule.goto) return paths;
    return paths.flatMap((path) => (path.control === 'end' ? continueWith(path.flow) : [path]));
  }

  /** `-m recent --set`: how affinity treats this client from now on. */
  private recentNote(rule: Rule, flow: Flow): string | undefined {
    const name = rule.targetOptions['recent-set'];
    if (name === undefined) return undefined;
    const seconds = this.recentSeconds(name);
    return `ClientIP affinity: recent list ${name} remembers ${flow.source}${seconds ? ` for ${seconds}s` : ''}, later connections go to the same endpoint`;
  }

  private recentSeconds(name: string): string | undefined {
    for (const chain of this.tables.get(this.table)?.values() ?? []) {
      for (const words of chain.rules) {
        const at = words.indexOf('--name');
        if (at >= 0 && words[at + 1] === name && words.includes('--seconds'))
          return words[words.indexOf('--seconds') + 1];
      }
    }
    return undefined;
  }

  private step(chain: string, kind: TraceStep['kind'], text: string, comment?: string): TraceStep {
    const service = serviceOfComment(comment);
    return {
      hook: this.hook,
      table: this.table,
      chain,
      kind,
      text,
      ...(service && { service }),
      ...(comment !== undefined && { note: comment }),
    };
  }
}

function markAfter(mark: number, options: Readonly<Record<string, string>>): number {
  const [value = 0, mask] = (
    options['--or-mark'] ??
    options['--xor-mark'] ??
    options['--and-mark'] ??
    options['--set-xmark'] ??
    options['--set-mark'] ??
    '0'
  )
    .split('/')
    .map(Number);
  if (options['--or-mark'] !== undefined) return (mark | value) >>> 0;
  if (options['--xor-mark'] !== undefined) return (mark ^ value) >>> 0;
  if (options['--and-mark'] !== undefined) return (mark & value) >>> 0;
  // --set-xmark value/mask: zero the mask bits, then xor the value (iptables-save's spelling of --or-mark too).
  const clear = mask ?? 0xffffffff;
  return ((mark & ~clear) ^ value) >>> 0;
}

/** Words of one rule → its matches and target, or undefined when some option is not understood. */
export function parseRule(words: readonly string[]): Rule | undefined {
  const matches: Match[] = [];
  const targetOptions: Record<string, string> = {};
  let target: string | undefined;
  let goto = false;
  let comment: string | undefined;
  let negated = false;
  const test = (check: (flow: Flow, host: TraceHost) => boolean) => {
    matches.push({ kind: 'test', negated, test: check });
    negated = false;
  };
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    const value = words[i + 1] ?? '';
    const takes = () => {
      i++;
      return value;
    };
    switch (word) {
      case '!':
        negated = true;
        continue;
      case '-p':
      case '--protocol': {
        const protocol = takes();
        test((flow) => valueMatches(protocol, flow.protocol));
        continue;
      }
      case '-s':
      case '--source': {
        const cidr = takes();
        test((flow) => valueMatches(cidr, flow.source));
        continue;
      }
      case '-d':
      case '--destination': {
        const cidr = takes();
        test((flow) => valueMatches(cidr, flow.destination));
        continue;
      }
      case '--dport':
      case '--destination-port': {
        const port = takes();
        test((flow) => valueMatches(port.replace(':', '-'), String(flow.port)));
        continue;
      }
      case '--sport':
      case '--source-port': {
        const port = takes();
        test((flow) => valueMatches(port.replace(':', '-'), String(flow.sourcePort)));
        continue;
      }
      case '--dports': {
        const ports = takes().split(',');
        test((flow) => ports.some((port) => valueMatches(port.replace(':', '-'), String(flow.port))));
        continue;
      }
      case '-m':
      case '--match':
        // Module names are implied by their options below; the names alone match everything.
        if (
          ![
            'comment',
            'tcp',
            'udp',
            'sctp',
            'statistic',
            'recent',
            'addrtype',
            'conntrack',
            'mark',
            'multiport',
            'nfacct',
          ].includes(value)
        )
          return undefined;
        i++;
        continue;
      case '--comment':
        comment = takes();
        continue;
      case '--mode':
        if (takes() !== 'random') return undefined;
        continue;
      case '--probability':
        matches.push({ kind: 'random', probability: Number(takes()) });
        continue;
      case '--name': {
        const name = takes();
        if (words.includes('--rcheck') || words.includes('--update'))
          matches.push({ kind: 'recent-check', name });
        else if (words.includes('--set')) targetOptions['recent-set'] = name;
        continue;
      }
      case '--rcheck':
      case '--update':
      case '--set':
      case '--reap':
      case '--rsource':
      case '--random-fully':
      case '--random':
        continue;
      case '--seconds':
      case '--nfacct-name':
      case '--mask':
      case '--reject-with':
      case '--limit-iface-in':
      case '--limit-iface-out':
        i++;
        continue;
      case '--src-type':
      case '--dst-type': {
        const type = takes();
        const source = word === '--src-type';
        test((flow, host) => {
          const local = isLocalAddress(host, source ? flow.source : flow.destination);
          return type.split(',').some((t) => (t === 'LOCAL' ? local : t === 'UNICAST' ? !local : false));
        });
        continue;
      }
      case '--ctstate': {
        const states = takes().split(',');
        test((flow) => states.includes('NEW') || (states.includes('DNAT') && flow.dnat !== undefined));
        continue;
      }
      case '--mark': {
        const [markValue = 0, mask = 0xffffffff] = takes().split('/').map(Number);
        test((flow) => (flow.mark & mask) >>> 0 === markValue);
        continue;
      }
      case '-j':
      case '--jump':
      case '-g':
      case '--goto':
        target = takes();
        goto = word === '-g' || word === '--goto';
        continue;
      case '--to-destination':
      case '--to-source':
      case '--or-mark':
      case '--xor-mark':
      case '--and-mark':
      case '--set-xmark':
      case '--set-mark':
      case '--to-ports':
        targetOptions[word] = takes();
        continue;
      default:
        return undefined;
    }
  }
  return {
    matches,
    targetOptions,
    goto,
    ...(target !== undefined && { target }),
    ...(comment !== undefined && { comment }),
  };
}
