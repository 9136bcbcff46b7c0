// A trace report for people (terminal text) and for programs (stable JSON): outcomes first,
// summed over the paths that end the same way, then each path's steps.
import type { TraceBranch, TraceOutcome, TraceReport, TraceStep } from './outcome.ts';
import { hostPort } from './packet.ts';

export interface OutcomeShare {
  readonly probability: number;
  readonly outcome: TraceOutcome;
}

/** Branches that end the same way, summed; in the order first seen. */
export function outcomeShares(report: TraceReport): OutcomeShare[] {
  const shares = new Map<string, { probability: number; outcome: TraceOutcome }>();
  for (const branch of report.branches) {
    const key = JSON.stringify(branch.outcome);
    const share = shares.get(key);
    if (share) share.probability += branch.probability;
    else shares.set(key, { probability: branch.probability, outcome: branch.outcome });
  }
  return [...shares.values()];
}

/** The Service the paths name (the first one named; paths of one packet name the same). */
export function reportService(report: TraceReport): string | undefined {
  return report.branches.find((branch) => branch.service !== undefined)?.service;
}

export function reportJson(report: TraceReport): string {
  const service = reportService(report);
  const json = {
    mode: report.mode,
    packet: report.packet,
    ...(service && { service }),
    outcomes: outcomeShares(report).map((share) => ({
      probability: round(share.probability),
      ...share.outcome,
    })),
    branches: report.branches.map((branch) => ({ ...branch, probability: round(branch.probability) })),
    notEvaluated: report.notEvaluated,
  };
  return `${JSON.stringify(json, null, 2)}\n`;
}

const VIA_TEXT = {
  pod: 'from a pod on this node',
  node: 'from this node',
  external: 'from outside the node',
};

export function reportText(report: TraceReport): string {
  const { packet } = report;
  const lines = [
    `${packet.protocol} ${hostPort(packet.source, packet.sourcePort)} -> ${hostPort(packet.destination, packet.port)}, ${VIA_TEXT[packet.via]} (${report.mode})`,
  ];
  const service = reportService(report);
  lines.push(service ? `service: ${service}` : "service: none of kproxy's rules name one");
  lines.push('', 'outcome:');
  for (const share of outcomeShares(report))
    lines.push(
      `  ${percent(share.probability).padStart(6)}  ${outcomeText(share.outcome)}`,
      ...outcomeDetails(share.outcome),
    );
  for (const [index, branch] of report.branches.entries())
    lines.push('', ...pathText(report.branches, branch, index));
  if (report.notEvaluated.length > 0) {
    lines.push('', "not evaluated (not kproxy's, or not understood):");
    for (const entry of report.notEvaluated) lines.push(`  ${entry}`);
  }
  return `${lines.join('\n')}\n`;
}

function outcomeText(outcome: TraceOutcome): string {
  switch (outcome.kind) {
    case 'dnat':
      return `DNAT to ${outcome.endpoint}`;
    case 'reject':
      return `REJECT by ${outcome.rule}`;
    case 'drop':
      return `DROP by ${outcome.rule}`;
    case 'no-service':
      return outcome.delivered === 'local'
        ? 'no service match: delivered to this node unchanged'
        : 'no service match: routed on unchanged';
  }
}

function outcomeDetails(outcome: TraceOutcome): string[] {
  if (outcome.kind !== 'dnat' && outcome.kind !== 'no-service') return [];
  const details = [`          endpoint sees ${outcome.seenSource} -> ${outcome.seenDestination}`];
  if (outcome.masquerade) {
    const why = outcome.masquerade.requestedBy
      ? `asked by ${outcome.masquerade.requestedBy}`
      : outcome.masquerade.rule;
    details.push(`          masquerade: ${why}`);
  } else details.push('          masquerade: no (source kept)');
  if (outcome.kind === 'dnat' && outcome.affinity) details.push(`          ${outcome.affinity}`);
  return details;
}

/** One path's steps; after the first, only where it leaves the previous path. */
function pathText(branches: readonly TraceBranch[], branch: TraceBranch, index: number): string[] {
  const ends = outcomeText(branch.outcome);
  const previous = branches[index - 1];
  let shared = 0;
  if (previous)
    while (
      shared < branch.steps.length &&
      JSON.stringify(branch.steps[shared]) === JSON.stringify(previous.steps[shared])
    )
      shared++;
  const header = `path ${index + 1} (${percent(branch.probability)}): ${ends}`;
  const lines = [shared > 0 ? `${header}; as path ${index} for ${shared} steps, then:` : `${header}:`];
  let lastHook = '';
  for (const step of branch.steps.slice(shared)) {
    if (step.hook !== lastHook) lines.push(`  [${step.hook}]`);
    lastHook = step.hook;
    lines.push(`    ${stepText(step)}`);
  }
  return lines;
}

function stepText(step: TraceStep): string {
  const where = `${step.table} ${step.chain}`;
  const note = step.note && step.note !== step.service ? `  # ${step.note}` : '';
  const service = step.service ? `  (${step.service})` : '';
  switch (step.kind) {
    case 'chain':
      return `${where}${note}`;
    case 'unknown':
      return `  ? ${step.text}${note}`;
    default:
      return `  ${step.text}${service}${step.kind === 'rule' || step.kind === 'ipvs' ? note : ''}`;
  }
}

function percent(probability: number): string {
  return `${(probability * 100).toFixed(1)}%`;
}

function round(probability: number): number {
  return Math.round(probability * 1e6) / 1e6;
}
