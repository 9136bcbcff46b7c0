// `kproxy diff` for the iptables mode: kproxy's chains (KPROXY-*) and its jumps from the built-in
// chains, as iptables-save lists them, against the render of the same objects; the other rules of
// the built-in chains are foreign, judged by the tracer (../shared/drift/foreign-hits.ts).
//
// Both sides are compared as iptables-save prints them: each rule of the render is put in its
// spelling by saved-spelling.ts, so a rule the kernel spells differently from the input is not
// drift. Nothing is restored for the comparison (it once went into a scratch network namespace,
// which the packaged unit may not make): the check runs with CAP_NET_ADMIN alone. Rules are
// compared as a multiset per chain (a reordered chain is not reported).
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { runInSlices, type Steps } from '../../contract/base/work-slices.ts';
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import {
  type DriftPiece,
  type DriftReader,
  type DriftReport,
  type ForeignRule,
  judged,
  multisetDifference,
  NODE_WIDE,
  serviceOfText,
  servicePortsOf,
} from '../shared/drift/drift-report.ts';
import { foreignHits } from '../shared/drift/foreign-hits.ts';
import { leftoverTables } from '../shared/drift/nft-foreign.ts';
import { serviceOfComment } from '../shared/trace/flow.ts';
import { readLocalAddresses } from '../shared/trace/live-host.ts';
import { chooseBackend, iptablesTools } from './backend.ts';
import type { FamilyPlan, IptablesPlan } from './plan-types.ts';
import { fullPlanSteps } from './planner.ts';
import { NFT_CHAINS_PER_RESTORE, restorePartsOf } from './restore-chunks.ts';
import { restoreInput } from './restore-plan.ts';
import { savedSpelling } from './saved-spelling.ts';
import { traceIptables } from './trace.ts';
import {
  applyIptablesRestoreSteps,
  BUILT_IN_CHAINS,
  emptyIptablesRuleset,
  type IptablesRuleset,
  type IptablesTables,
} from './trace-ruleset.ts';

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];
const OWN = /^KPROXY-/;

/** One rule as iptables-save prints it, for a person. */
function ruleText(chain: string, words: readonly string[]): string {
  return `-A ${chain} ${words.map((word) => (/\s/.test(word) ? JSON.stringify(word) : word)).join(' ')}`;
}

function isOwnRule(words: readonly string[]): boolean {
  return words.some((word) => OWN.test(word));
}

/**
 * The render's tables of `family`, each rule as iptables-save would list it once restored. Made in
 * steps, from the restore inputs iptables-nft gets (applied in turn they leave what the whole
 * input leaves), not from one text of the whole render: that is ~100 MB at 30,000 Services.
 */
function* savedRenderSteps(family: IPFamily, plan: FamilyPlan | undefined): Steps<IptablesTables> {
  const ruleset = emptyIptablesRuleset();
  for (const part of plan ? restorePartsOf(plan, NFT_CHAINS_PER_RESTORE) : [])
    yield* applyIptablesRestoreSteps(ruleset, restoreInput(part), { family });
  let spelled = 0;
  for (const chains of ruleset[family].values())
    for (const chain of chains.values())
      for (const [at, words] of chain.rules.entries()) {
        chain.rules[at] = savedSpelling(family, words);
        if (++spelled % STEP === 0) yield;
      }
  return ruleset[family];
}

/** Rules spelled, or chains compared, between two steps. */
const STEP = 256;

function* compareFamilySteps(
  family: IPFamily,
  desired: IptablesTables,
  live: IptablesTables,
  servicePorts: readonly ServicePort[],
): Steps<DriftPiece[]> {
  const pieces: DriftPiece[] = [];
  let compared = 0;
  for (const table of new Set([...desired.keys(), ...live.keys()])) {
    const want = desired.get(table) ?? new Map();
    const have = live.get(table) ?? new Map();
    const where = `${family} ${table}`;
    for (const chain of new Set([...want.keys(), ...have.keys()])) {
      if (++compared % STEP === 0) yield;
      const builtIn = BUILT_IN_CHAINS.has(chain);
      if (!builtIn && !OWN.test(chain)) continue;
      if (!builtIn && (!want.has(chain) || !have.has(chain))) {
        const kind = want.has(chain) ? 'missing' : 'extra';
        pieces.push({ kind, service: NODE_WIDE, where: `${where} chain ${chain}`, text: `chain ${chain}` });
        continue;
      }
      // In built-in chains only the jumps into kproxy's chains are kproxy's.
      const ours = (rules: string[][] | undefined) =>
        (rules ?? []).filter((words) => !builtIn || isOwnRule(words)).map((words) => ruleText(chain, words));
      const piece = (kind: DriftPiece['kind'], text: string) =>
        pieces.push({
          kind,
          service:
            serviceOfComment(text.match(/--comment "?([^"]*)/)?.[1]) ?? serviceOfText(text, servicePorts),
          where: `${where} chain ${chain}`,
          text,
        });
      const { missing, extra } = multisetDifference(
        ours(want.get(chain)?.rules),
        ours(have.get(chain)?.rules),
      );
      for (const text of missing) piece('missing', text);
      for (const text of extra) piece('extra', text);
    }
  }
  return pieces;
}

/** The other owners' rules in the built-in chains, each with the Service ports it drops. */
async function judgeForeign(
  live: IptablesRuleset,
  servicePorts: readonly ServicePort[],
  localAddresses: readonly string[],
): Promise<ForeignRule[]> {
  const rules = new Map<string, { where: string; text: string }>();
  for (const family of FAMILIES)
    for (const [table, chains] of live[family])
      for (const [chain, { rules: list }] of chains) {
        if (!BUILT_IN_CHAINS.has(chain)) continue;
        for (const words of list) {
          if (isOwnRule(words)) continue;
          const text = ruleText(chain, words);
          rules.set(`${table}\n${text}`, { where: `${family} ${table} chain ${chain}`, text });
        }
      }
  if (rules.size === 0) return [];
  const hits = await foreignHits(
    servicePorts,
    localAddresses,
    (packet) => traceIptables(live, packet, { localAddresses }, { foreignRules: true }),
    (step) => BUILT_IN_CHAINS.has(step.chain) && !OWN.test(step.text.split(' -j ')[1] ?? ''),
    (step) => `${step.table}\n${step.text}`,
  );
  return judged(rules, hits);
}

export interface IptablesDriftInput {
  /** A full plan of the render: its restore inputs are compared. */
  readonly plan: IptablesPlan;
  readonly servicePorts: readonly ServicePort[];
  readonly localAddresses: readonly string[];
}

/** The iptables drift report, from the backend that holds kproxy's rules (as the daemon picks it). */
export async function iptablesDrift(runner: CommandRunner, input: IptablesDriftInput): Promise<DriftReport> {
  const { backend } = await chooseBackend(runner);
  const pieces: DriftPiece[] = [];
  // Each family's parse and comparison in slices: at 30,000 Services they take seconds, which the
  // daemon's event loop (/healthz, informer events) must not wait out.
  const live = emptyIptablesRuleset();
  for (const family of FAMILIES) {
    const { save } = iptablesTools(backend, family);
    const saved = await runner.run(save, []);
    if (saved.exitCode !== 0) throw new Error(`${save}: ${saved.stderr.trim()}`);
    await runInSlices(applyIptablesRestoreSteps(live, saved.stdout, { family }));
    const desired = await runInSlices(savedRenderSteps(family, input.plan[family]));
    pieces.push(
      ...(await runInSlices(compareFamilySteps(family, desired, live[family], input.servicePorts))),
    );
  }
  const others = await leftoverTables(runner);
  return {
    mode: 'iptables',
    pieces: [...pieces, ...others.pieces],
    foreign: await judgeForeign(live, input.servicePorts, input.localAddresses),
    unreadable: others.unreadable,
  };
}

/** The iptables mode's reader: a full plan of each state (made in slices) against the kernel. */
export function iptablesDriftReader(runner: CommandRunner): DriftReader {
  return async (state) =>
    iptablesDrift(runner, {
      plan: await runInSlices(fullPlanSteps(state)),
      servicePorts: servicePortsOf(state),
      localAddresses: await readLocalAddresses(runner),
    });
}
