// The lab's comparison: one row per scenario, one column per lab (mode), each cell pass/fail with
// the slowest convergence seen (how long the nodes took to follow a change); then the evidence
// of every failed check, so a red cell explains itself.
import type { ScenarioResult } from './scenarios/scenario.ts';

export interface LabReport {
  /** E.g. "netns/nftables". */
  readonly lab: string;
  readonly results: readonly ScenarioResult[];
  /** Extra facts about the lab, e.g. its daemons' median sync duration. */
  readonly notes?: readonly string[];
}

function cell(result: ScenarioResult | undefined): string {
  // Every scenario applies to every mode today; a lab that did not run one says so.
  if (!result) return 'n/a (not run)';
  const slowest = result.convergeMs.length > 0 ? ` ${Math.max(...result.convergeMs)}ms` : '';
  return `${result.passed ? 'PASS' : 'FAIL'}${slowest}`;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function formatComparison(reports: readonly LabReport[]): string {
  const scenarios = [...new Set(reports.flatMap((r) => r.results.map((s) => s.scenario)))];
  const rows = [
    ['scenario', ...reports.map((r) => r.lab)],
    ...scenarios.map((name) => [
      name,
      ...reports.map((r) => cell(r.results.find((s) => s.scenario === name))),
    ]),
  ];
  const out = [table(rows), '(PASS/FAIL, then the slowest wait for the nodes to follow a change)'];
  for (const report of reports) {
    for (const note of report.notes ?? []) out.push(`${report.lab}: ${note}`);
    for (const result of report.results) {
      if (!result.passed) out.push('', `${report.lab} ${formatFailure(result)}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** A failed scenario: why it stopped, and the evidence of each failed check. */
export function formatFailure(result: ScenarioResult): string {
  const lines = [`${result.scenario} FAILED${result.error ? `: ${result.error}` : ''}`];
  for (const check of result.checks.filter((c) => !c.passed))
    lines.push(`  ✗ ${check.what}: ${check.evidence}`);
  return lines.join('\n');
}
