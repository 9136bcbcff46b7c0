// The nftables tracer: walks a packet through nft rule text (what kproxy renders, or what the
// kernel lists) and reports every path with its probability. Only kproxy's tables are
// evaluated; other tables hooked where the packet passes are named as not evaluated.

import { addressBytes } from '../nft/element-encoding.ts';
import { findElement } from './element-index.ts';
import {
  type Flow,
  type HookEvaluator,
  type HookName,
  serviceOfComment,
  walkHooks,
  withStep,
} from './flow.ts';
import { nftJhash } from './jhash.ts';
import { valueMatches } from './match-value.ts';
import { type NftClause, type NftExpr, type NftLookup, type ParsedRule, parseRule } from './nft-rule.ts';
import {
  type NftChain,
  type NftElement,
  type NftRule,
  type NftRuleset,
  type NftTable,
  nftSeconds,
} from './nft-ruleset.ts';
import type { TraceReport, TraceStep } from './outcome.ts';
import { isLocalAddress, packetFamily, type TraceHost, type TracePacket } from './packet.ts';

/** Tables kproxy owns: its own and the IPVS mode's companion. */
export const KPROXY_TABLES: ReadonlySet<string> = new Set(['kproxy', 'kproxy-ipvs']);

/** How a chain ended for the caller: fell off the end (or `return`), or a verdict for the hook. */
type Control = 'end' | 'accept' | 'stop';
interface Path {
  readonly flow: Flow;
  readonly control: Control;
}

export interface NftTraceOptions {
  readonly host: TraceHost;
  /** Evaluate other owners' tables too (`kproxy diff` asks which of their rules hit a Service). */
  readonly foreignTables?: boolean;
  /** Extra work at a hook after the chains of a priority (IPVS hooks in between). */
  readonly extraHooks?: readonly {
    readonly hook: HookName;
    readonly priority: number;
    readonly run: (flow: Flow) => readonly Flow[];
  }[];
}

export function traceNftables(
  ruleset: NftRuleset,
  packet: TracePacket,
  options: NftTraceOptions,
  mode = 'nftables',
): TraceReport {
  const evaluator = new NftEvaluator(ruleset, packet, options);
  const branches = walkHooks(packet, options.host, evaluator.hookEvaluator());
  return { mode, packet, branches, notEvaluated: evaluator.notEvaluated() };
}

class NftEvaluator {
  private readonly parsed = new Map<NftRule, ParsedRule>();
  private readonly skipped = new Set<string>();
  private readonly family: 'ip' | 'ip6';
  private readonly ruleset: NftRuleset;
  private readonly options: NftTraceOptions;

  constructor(ruleset: NftRuleset, packet: TracePacket, options: NftTraceOptions) {
    this.ruleset = ruleset;
    this.options = options;
    this.family = packetFamily(packet) === 'IPv4' ? 'ip' : 'ip6';
    for (const line of ruleset.unknown) this.skipped.add(`not understood: ${line}`);
  }

  notEvaluated(): string[] {
    return [...this.skipped];
  }

  hookEvaluator(): HookEvaluator {
    return (hook, flow) => this.runHook(hook, flow);
  }

  private runHook(hook: HookName, flow: Flow): readonly Flow[] {
    type Stage = { priority: number; run: (flow: Flow) => readonly Flow[] };
    const stages: Stage[] = [];
    for (const table of this.ruleset.tables.values()) {
      if (table.family !== this.family && table.family !== 'inet') continue;
      for (const chain of table.chains.values()) {
        if (chain.hook?.hook !== hook) continue;
        if (!KPROXY_TABLES.has(table.name) && this.options.foreignTables !== true) {
          this.skipped.add(`${table.family} ${table.name} ${chain.name} (${hook}): not kproxy's table`);
          continue;
        }
        stages.push({
          priority: chain.hook.priority,
          run: (current) => this.runBaseChain(hook, table, chain, current),
        });
      }
    }
    for (const extra of this.options.extraHooks ?? [])
      if (extra.hook === hook) stages.push({ priority: extra.priority, run: extra.run });
    stages.sort((a, b) => a.priority - b.priority);
    return stages.reduce<readonly Flow[]>(
      (flows, stage) => flows.flatMap((current) => (current.verdict ? [current] : stage.run(current))),
      [flow],
    );
  }

  private runBaseChain(hook: HookName, table: NftTable, chain: NftChain, flow: Flow): Flow[] {
    return this.runChain(hook, table, chain, flow).map((path) => {
      if (path.control !== 'end' || chain.policy === 'accept') return path.flow;
      return { ...path.flow, verdict: { kind: 'drop' as const, rule: `policy drop of ${chain.name}` } };
    });
  }

  private runChain(hook: HookName, table: NftTable, chain: NftChain, flow: Flow): Path[] {
    const entered = withStep(flow, this.step(hook, table, chain, 'chain', chain.name, chain.comment));
    return this.runRules(hook, table, chain, 0, entered);
  }

  private runRules(hook: HookName, table: NftTable, chain: NftChain, index: number, flow: Flow): Path[] {
    const rule = chain.rules[index];
    if (rule === undefined) return [{ flow, control: 'end' }];
    const parsed = this.parse(rule);
    if (!parsed.ok) {
      const step = this.step(
        hook,
        table,
        chain,
        'unknown',
        rule.text,
        undefined,
        `not evaluated: ${parsed.reason}`,
      );
      this.skipped.add(`${table.family} ${table.name} ${chain.name}: ${rule.text}`);
      return this.runRules(hook, table, chain, index + 1, withStep(flow, step));
    }
    const context: RuleContext = { hook, table, chain, rule, comment: parsed.comment };
    return this.runClauses(context, parsed.clauses, 0, flow, false).flatMap((outcome) => {
      if (outcome.control === 'next') return this.runRules(hook, table, chain, index + 1, outcome.flow);
      if (outcome.control === 'jump' || outcome.control === 'goto') {
        const target = table.chains.get(outcome.chain);
        if (target === undefined) return [{ flow: outcome.flow, control: 'end' as const }];
        const paths = this.runChain(hook, table, target, outcome.flow);
        if (outcome.control === 'goto') return paths;
        return paths.flatMap((path) =>
          path.control === 'end' ? this.runRules(hook, table, chain, index + 1, path.flow) : [path],
        );
      }
      if (outcome.control === 'return') return [{ flow: outcome.flow, control: 'end' as const }];
      return [{ flow: outcome.flow, control: outcome.control }];
    });
  }

  /** Evaluates a rule's clauses from `index`; forks where a value is random. */
  private runClauses(
    context: RuleContext,
    clauses: readonly NftClause[],
    index: number,
    flow: Flow,
    recorded: boolean,
  ): RuleOutcome[] {
    const clause = clauses[index];
    if (clause === undefined) return [{ flow, control: 'next' }];
    const record = (current: Flow, note?: string) =>
      recorded ? current : withStep(current, this.ruleStep(context, note));
    const next = (current: Flow, marked = recorded) =>
      this.runClauses(context, clauses, index + 1, current, marked);
    switch (clause.kind) {
      case 'match':
        return this.values(clause.left, flow).flatMap<RuleOutcome>(({ probability, parts }) => {
          const forked = { ...flow, probability: flow.probability * probability };
          const found = this.lookup(context.table, clause.right, parts, clause.mask);
          // A named set's element that says whose it is tells the reader which Service this is.
          const seen =
            found.element?.comment !== undefined && clause.right.kind === 'set'
              ? withStep(forked, this.elementStep(context, clause.right, found.element))
              : forked;
          return found.matched !== clause.negated ? next(seen) : [{ flow: seen, control: 'next' as const }];
        });
      case 'vmap':
        return this.values(clause.left, flow).flatMap<RuleOutcome>(({ probability, parts }) => {
          const forked = { ...flow, probability: flow.probability * probability };
          const found = this.lookup(context.table, clause.map, parts);
          if (!found.matched || found.element?.value === undefined)
            return [{ flow: forked, control: 'next' as const }];
          const withElement = withStep(record(forked), this.elementStep(context, clause.map, found.element));
          const [verdict, chain] = found.element.value;
          return this.verdictOutcome(verdict!, chain, withElement, context);
        });
      case 'verdict':
      case 'jump':
      case 'goto': {
        const verdict = clause.kind === 'verdict' ? clause.verdict : clause.kind;
        return this.verdictOutcome(
          verdict,
          clause.kind === 'verdict' ? undefined : clause.chain,
          record(flow),
          context,
        );
      }
      case 'mark': {
        const mark = markAfter(flow.mark, clause.operation, clause.value);
        // The rule that jumped here is the reason; this rule itself when it is a base of its own.
        // Only a mark that gains bits asks for something (clearing it after use does not).
        const gained = (mark & ~flow.mark) !== 0;
        const markedBy = gained
          ? (flow.lastJump ?? `${context.chain.name}: ${context.rule.text}`)
          : flow.markedBy;
        return next(record({ ...flow, mark, ...(markedBy && { markedBy }) }), true);
      }
      case 'update': {
        const seconds = clause.timeout
          ? nftSeconds(clause.timeout)
          : context.table.sets.get(clause.set)?.timeout;
        const timeout = seconds ? ` for ${seconds}s` : '';
        const affinity = `ClientIP affinity: @${clause.set} remembers ${flow.source}${timeout}, later connections go to the same endpoint`;
        return next(record({ ...flow, affinity }), true);
      }
      case 'set-field':
        return this.values(clause.value, flow).flatMap<RuleOutcome>(({ probability, parts }) => {
          const forked = { ...flow, probability: flow.probability * probability };
          if (!clause.map) {
            const value = parts.length === 1 ? parts[0] : undefined;
            if (value === undefined) return [{ flow: forked, control: 'next' as const }];
            return next(record(writeField(forked, clause.field, value)), true);
          }
          const found = this.lookup(context.table, clause.map, parts);
          const value = found.element?.value?.[0];
          // Nothing to write (a map without the key): nft stops evaluating the rule there.
          if (value === undefined) return [{ flow: forked, control: 'next' as const }];
          // The element read (a key's endpoint count, say) decides what follows: shown as a step.
          const withElement = withStep(record(forked), this.elementStep(context, clause.map, found.element!));
          return next(writeField(withElement, clause.field, value), true);
        });
      case 'dnat':
        return this.dnat(context, clause, record(flow));
      case 'snat':
      case 'masquerade': {
        const requestedBy = flow.markedBy;
        const masquerade = {
          rule: `${context.chain.name}: ${context.rule.text}`,
          ...(requestedBy && requestedBy !== context.rule.text && { requestedBy }),
        };
        return [{ flow: { ...record(flow), masquerade }, control: 'accept' }];
      }
    }
  }

  private dnat(
    context: RuleContext,
    clause: Extract<NftClause, { kind: 'dnat' }>,
    flow: Flow,
  ): RuleOutcome[] {
    const to = clause.to;
    if ('address' in to)
      return [{ flow: dnatTo(flow, parseHostPort(to.address, flow.port)), control: 'accept' }];
    const byPort = 'field' in to;
    const lookup = byPort ? to.port : to;
    return this.values(lookup.left, flow).flatMap<RuleOutcome>(({ probability, parts }) => {
      const forked = { ...flow, probability: flow.probability * probability };
      const found = this.lookup(context.table, lookup.map, parts);
      const value = found.element?.value ?? [];
      const [address, port] = byPort ? [this.field(to.field, flow), value[0]] : value;
      if (!found.matched || address === undefined || (byPort && port === undefined))
        return [{ flow: forked, control: 'next' as const }];
      const withElement = withStep(forked, this.elementStep(context, lookup.map, found.element!));
      const target = { address, port: port === undefined ? flow.port : Number(port) };
      return [{ flow: dnatTo(withElement, target), control: 'accept' as const }];
    });
  }

  private verdictOutcome(
    verdict: string,
    chain: string | undefined,
    flow: Flow,
    context: RuleContext,
  ): RuleOutcome[] {
    if (verdict === 'jump' || verdict === 'goto') {
      const lastJump = `${context.chain.name}: ${context.rule.text}`;
      return [{ flow: { ...flow, lastJump }, control: verdict, chain: chain ?? '' }];
    }
    if (verdict === 'drop' || verdict === 'reject') {
      const rule = `${context.chain.name}: ${context.rule.text}`;
      return [{ flow: { ...flow, verdict: { kind: verdict, rule } }, control: 'stop' }];
    }
    if (verdict === 'accept') return [{ flow, control: 'accept' }];
    if (verdict === 'return') return [{ flow, control: 'return' }];
    return [{ flow, control: 'next' }];
  }

  /** The values of a selector list for this flow: one, or one per numgen outcome. */
  private values(
    exprs: readonly NftExpr[],
    flow: Flow,
  ): { probability: number; parts: (string | undefined)[] }[] {
    let results: { probability: number; parts: (string | undefined)[] }[] = [{ probability: 1, parts: [] }];
    for (const expr of exprs) {
      if (expr.kind === 'numgen') {
        results = results.flatMap((result) =>
          Array.from({ length: expr.modulus }, (_, n) => ({
            probability: result.probability / expr.modulus,
            parts: [...result.parts, String(n + expr.offset)],
          })),
        );
      } else if (expr.kind === 'jhash') {
        const address = this.field(expr.field, flow);
        const value =
          address === undefined
            ? undefined
            : String(nftJhash(addressBytes(address), expr.modulus, expr.seed, expr.offset));
        results = results.map((result) => ({ ...result, parts: [...result.parts, value] }));
      } else {
        const value = expr.kind === 'literal' ? expr.text : this.field(expr.name, flow);
        results = results.map((result) => ({ ...result, parts: [...result.parts, value] }));
      }
    }
    return results;
  }

  private field(name: string, flow: Flow): string | undefined {
    const protocolField = name.match(/^(tcp|udp|sctp) (dport|sport)$/);
    if (protocolField) {
      if (protocolField[1] !== flow.protocol) return undefined;
      return String(protocolField[2] === 'dport' ? flow.port : flow.sourcePort);
    }
    switch (name) {
      case 'ip saddr':
      case 'ip6 saddr':
        return flow.source;
      case 'ip daddr':
      case 'ip6 daddr':
        return flow.destination;
      case 'meta l4proto':
      case 'ip protocol':
      case 'ip6 nexthdr':
        return flow.protocol;
      case 'th dport':
        return String(flow.port);
      case 'th sport':
        return String(flow.sourcePort);
      case 'meta mark':
        return String(flow.mark);
      case 'meta nfproto':
        return this.family === 'ip' ? 'ipv4' : 'ipv6';
      case 'ct state':
        return 'new';
      case 'ct original ip daddr':
      case 'ct original ip6 daddr':
        return flow.originalDestination;
      case 'ct original proto-dst':
        return String(flow.originalPort);
      case 'ct status':
        return flow.dnat === undefined ? '' : 'dnat';
      case 'fib saddr type':
        return isLocalAddress(this.options.host, flow.source) ? 'local' : 'unicast';
      case 'fib daddr type':
        return isLocalAddress(this.options.host, flow.destination) ? 'local' : 'unicast';
      default:
        return undefined;
    }
  }

  private lookup(
    table: NftTable,
    lookup: NftLookup,
    parts: readonly (string | undefined)[],
    mask?: number,
  ): { matched: boolean; element?: NftElement } {
    if (parts.some((part) => part === undefined)) return { matched: false };
    const values = parts as string[];
    if (lookup.kind === 'value') {
      const actual = mask === undefined ? values : [String(Number(values[0]) & mask)];
      return { matched: lookup.parts.every((pattern, i) => valueMatches(pattern, actual[i] ?? '')) };
    }
    const elements = lookup.kind === 'set' ? (table.sets.get(lookup.name)?.elements ?? []) : lookup.elements;
    const element = findElement(elements, values);
    return element ? { matched: true, element } : { matched: false };
  }

  private parse(rule: NftRule): ParsedRule {
    let parsed = this.parsed.get(rule);
    if (parsed === undefined) {
      parsed = parseRule(rule.tokens);
      this.parsed.set(rule, parsed);
    }
    return parsed;
  }

  private step(
    hook: HookName,
    table: NftTable,
    chain: NftChain,
    kind: TraceStep['kind'],
    text: string,
    comment?: string,
    note?: string,
  ): TraceStep {
    const service = serviceOfComment(comment);
    return {
      hook,
      table: `${table.family} ${table.name}`,
      chain: chain.name,
      kind,
      text,
      ...(service && { service }),
      ...((note ?? comment) !== undefined && { note: note ?? comment }),
    };
  }

  private ruleStep(context: RuleContext, note?: string): TraceStep {
    return this.step(
      context.hook,
      context.table,
      context.chain,
      'rule',
      context.rule.text,
      context.comment,
      note,
    );
  }

  private elementStep(context: RuleContext, lookup: NftLookup, element: NftElement): TraceStep {
    const where = lookup.kind === 'set' ? `@${lookup.name}` : 'anonymous map';
    const value = element.value
      ? ` : ${element.value.join(element.value[0] === 'goto' || element.value[0] === 'jump' ? ' ' : ' . ')}`
      : '';
    return this.step(
      context.hook,
      context.table,
      context.chain,
      'element',
      `${where} ${element.key.join(' . ')}${value}`,
      element.comment,
    );
  }
}

interface RuleContext {
  readonly hook: HookName;
  readonly table: NftTable;
  readonly chain: NftChain;
  readonly rule: NftRule;
  readonly comment: string | undefined;
}

type RuleOutcome =
  | { readonly flow: Flow; readonly control: 'next' | 'accept' | 'stop' | 'return' }
  | { readonly flow: Flow; readonly control: 'jump' | 'goto'; readonly chain: string };

/** The flow with one payload field rewritten (`ip daddr set …`, `tcp dport set …`). */
function writeField(flow: Flow, field: string, value: string): Flow {
  if (/^ip6? daddr$/.test(field)) return { ...flow, destination: value };
  if (/^ip6? saddr$/.test(field)) return { ...flow, source: value };
  if (/^(th|tcp|udp|sctp) dport$/.test(field)) return { ...flow, port: Number(value) };
  if (/^(th|tcp|udp|sctp) sport$/.test(field)) return { ...flow, sourcePort: Number(value) };
  return flow;
}

function markAfter(mark: number, operation: 'or' | 'xor' | 'and' | 'set', value: number): number {
  if (operation === 'or') return (mark | value) >>> 0;
  if (operation === 'xor') return (mark ^ value) >>> 0;
  if (operation === 'and') return (mark & value) >>> 0;
  return value >>> 0;
}

/** "10.0.0.1:80", "[fd00::1]:80" or a bare address (the port kept). */
export function parseHostPort(text: string, port: number): { address: string; port: number } {
  const bracketed = text.match(/^\[(.+)\](?::(\d+))?$/);
  if (bracketed) return { address: bracketed[1]!, port: bracketed[2] ? Number(bracketed[2]) : port };
  const v4 = text.match(/^([\d.]+)(?::(\d+))?$/);
  if (v4) return { address: v4[1]!, port: v4[2] ? Number(v4[2]) : port };
  return { address: text, port };
}

export function dnatTo(flow: Flow, target: { address: string; port: number }): Flow {
  const endpoint = target.address.includes(':')
    ? `[${target.address}]:${target.port}`
    : `${target.address}:${target.port}`;
  return { ...flow, destination: target.address, port: target.port, dnat: endpoint };
}
