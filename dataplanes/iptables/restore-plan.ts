// The iptables plan: per family, what to feed iptables-restore --noflush, table by table.
// Its text form (restoreInput) IS the restore input, the dry-run output and the golden files.
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { runAll, type Steps, sortSteps } from '../../contract/base/work-slices.ts';
import { printInputs, type ToolInput } from '../../contract/tool-inputs.ts';
import { insertLine } from './jump-rules.ts';
import { NFACCT_INPUT } from './nfacct-objects.ts';
import type { Chains, FamilyPlan, IptablesPlan, IptablesTable } from './plan-types.ts';
import { NFT_CHAINS_PER_RESTORE, restorePartCount, restoreParts } from './restore-chunks.ts';
import { dispatchRulesInWriteOrder, isDispatchChain } from './service-dispatch.ts';

export const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

/** The exact iptables-restore input for one family; "" when there is nothing to do. */
export function restoreInput(plan: FamilyPlan): string {
  return runAll(restoreInputSteps(plan)).join('');
}

/** Lines written between two steps of restoreInputSteps. */
const LINES_PER_STEP = 1024;

/**
 * restoreInput in steps, and in pieces of LINES_PER_STEP lines that are the input joined (none
 * when there is nothing to do): iptables-legacy gets a family's full sync as one input, ~100 MB at
 * 30,000 Services × 10 endpoints, which the daemon must neither write nor join in one turn of its
 * event loop (one join of ~1,000,000 lines takes seconds); the runner writes the pieces in turn.
 */
export function* restoreInputSteps(plan: FamilyPlan): Steps<string[]> {
  const pieces: string[] = [];
  let lines: string[] = [];
  const write = (line: string): boolean => {
    if (lines.push(line) < LINES_PER_STEP) return false;
    pieces.push(`${lines.join('\n')}\n`);
    lines = [];
    return true;
  };
  for (const { table, chains, deleted, jumps } of plan.tables) {
    if (chains.size === 0 && deleted.length === 0 && jumps.length === 0) continue;
    write(`*${table}`);
    // Declared in descending name order: iptables-nft-restore --noflush walks its sorted list of the
    // names an input mentions from the head for each one (ENDPOINT_CHAIN_PREFIX), so each new name,
    // the smallest yet, is found at once; in plan order (hashed names) a part of n chains took n²/4.
    for (const chain of yield* sortSteps([...chains.keys(), ...deleted], descending))
      if (write(`:${chain} - [0:0]`)) yield;
    for (const rule of ruleLines(chains)) if (write(rule)) yield;
    for (const jump of jumps) write(insertLine(jump));
    for (const chain of deleted) write(`-X ${chain}`);
    write('COMMIT');
  }
  if (lines.length > 0) pieces.push(`${lines.join('\n')}\n`);
  return pieces;
}

/**
 * Back to front: a chain's rules before those of the chains that jump to it (each jumps only to
 * chains after it). iptables-nft-restore --noflush walks a sorted list of the names the input
 * has mentioned for each rule's chain (ENDPOINT_CHAIN_PREFIX): an endpoint chain's rules written
 * after its SVC chain's would each walk past half of that Service's endpoints. The chains of the
 * service dispatch tree (next to each other in a plan) are written together (dispatchRulesInWriteOrder).
 */
function* ruleLines(chains: Chains): Generator<string, void, void> {
  let dispatch: string[] = [];
  for (const [chain, rules] of [...chains].reverse()) {
    if (isDispatchChain(chain)) {
      for (const rule of rules) dispatch.push(rule);
      continue;
    }
    if (dispatch.length > 0) {
      yield* dispatchRulesInWriteOrder(dispatch);
      dispatch = [];
    }
    yield* rules;
  }
  yield* dispatchRulesInWriteOrder(dispatch);
}

function descending(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

/** The restore command per family, as the live dataplane runs it (--noflush: other chains stay). */
function restoreCommand(family: IPFamily): string {
  return `${family === 'IPv4' ? 'iptables' : 'ip6tables'}-restore --noflush`;
}

/** A full sync's first step: the nfacct objects its rules count in (nfacct-objects.ts). */
function withNfacct(plan: IptablesPlan, inputs: ToolInput[]): ToolInput[] {
  return plan.kind === 'full' ? [NFACCT_INPUT, ...inputs] : inputs;
}

/**
 * Both families' restore inputs, each under a header line naming its tool (a restore comment):
 * the input as iptables-legacy gets it. When iptables-nft gets it in parts, the header says how
 * many (planInputsInParts gives them).
 */
export function planInputs(plan: IptablesPlan): ToolInput[] {
  const inputs: ToolInput[] = [];
  for (const family of FAMILIES) {
    const familyPlan = plan[family];
    if (familyPlan === undefined) continue;
    const count = restorePartCount(familyPlan, NFT_CHAINS_PER_RESTORE);
    const split = count > 1 ? `; iptables-nft sends it as ${count} inputs: render --chunks` : '';
    const command = restoreCommand(family);
    inputs.push({
      title: `${command} input (${plan.kind}${split})`,
      command,
      input: restoreInput(familyPlan),
    });
  }
  return withNfacct(plan, inputs);
}

/**
 * The restore inputs exactly as the live dataplane sends them on iptables-nft, where plans with
 * more than `maxChains` service chains go in parts: each input under a header line naming it.
 */
export function planInputsInParts(plan: IptablesPlan, maxChains: number): ToolInput[] {
  const out: ToolInput[] = [];
  for (const family of FAMILIES) {
    const familyPlan = plan[family];
    if (familyPlan === undefined) continue;
    const inputs = restoreParts(familyPlan, maxChains)
      .map(restoreInput)
      .filter((input) => input !== '');
    const command = restoreCommand(family);
    inputs.forEach((input, i) => {
      out.push({
        title: `${command} input ${i + 1}/${inputs.length} (${plan.kind}; iptables-nft)`,
        command,
        input,
      });
    });
  }
  return withNfacct(plan, out);
}

export function renderPlan(plan: IptablesPlan): string {
  return printInputs(planInputs(plan));
}

export function renderPlanInParts(plan: IptablesPlan, maxChains: number): string {
  return printInputs(planInputsInParts(plan, maxChains));
}

/**
 * Rules per "table/chain" as the restores left them (the record intact-check.ts compares), with
 * each table's total kept alongside: the metrics read the totals after every sync, and summing
 * 300k chains at 30,000 Services × 10 cost more than the rest of one endpoint change.
 */
export class RuleCounts {
  readonly #counts = new Map<string, number>();
  readonly #totals = new Map<IptablesTable, number>();

  get byChain(): ReadonlyMap<string, number> {
    return this.#counts;
  }

  /** The rules in `table`'s chains. */
  total(table: IptablesTable): number {
    return this.#totals.get(table) ?? 0;
  }

  /** After `plan`'s restore: its chains hold their rules, its deleted ones none. */
  apply(plan: FamilyPlan): void {
    for (const { table, chains, deleted } of plan.tables) {
      for (const [chain, rules] of chains) this.#set(table, chain, rules.length);
      for (const chain of deleted) this.#set(table, chain, undefined);
    }
  }

  #set(table: IptablesTable, chain: string, rules: number | undefined): void {
    const key = `${table}/${chain}`;
    const change = (rules ?? 0) - (this.#counts.get(key) ?? 0);
    if (rules === undefined) this.#counts.delete(key);
    else this.#counts.set(key, rules);
    this.#totals.set(table, this.total(table) + change);
  }
}
