// `npm run lab`: every scenario against the netns lab, once per mode, then the comparison table.
//   node lab/main.ts [--modes nftables,iptables] [--nodes 2] [--pods-per-node 2] [--json]
// Needs root (it creates network namespaces, and only those). Exit status 1 when a check failed.
import { parseArgs } from 'node:util';
import type { DataplaneMode } from '../dataplanes/shared/dataplane.ts';
import { LIVE_MODES } from '../src/daemon/live-dataplanes.ts';
import { NetnsLab } from './netns-lab.ts';
import { formatComparison, type LabReport } from './report.ts';
import { ALL_SCENARIOS } from './scenarios/all.ts';
import { runScenario } from './scenarios/scenario.ts';
import { syncDurationNote } from './sync-durations.ts';

const { values } = parseArgs({
  options: {
    modes: { type: 'string', default: LIVE_MODES.join(',') },
    nodes: { type: 'string', default: '2' },
    'pods-per-node': { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
  },
});

if (process.getuid?.() !== 0) {
  console.error('lab: needs root to create network namespaces (it changes nothing outside them)');
  process.exit(2);
}
const modes = values.modes.split(',').filter(Boolean) as DataplaneMode[];
const unknown = modes.filter((m) => !LIVE_MODES.includes(m));
if (unknown.length > 0) {
  console.error(`lab: --modes ${unknown.join(',')}: this build can run ${LIVE_MODES.join(', ')}`);
  process.exit(2);
}

const reports: LabReport[] = [];
for (const mode of modes) {
  process.stderr.write(`lab: starting the netns lab for ${mode}\n`);
  const lab = await NetnsLab.start({
    mode,
    nodes: Number(values.nodes),
    podsPerNode: Number(values['pods-per-node']),
  });
  try {
    const results = [];
    for (const scenario of ALL_SCENARIOS) {
      const result = await runScenario(lab, scenario);
      process.stderr.write(`lab: ${lab.name} ${scenario.name}: ${result.passed ? 'pass' : 'FAIL'}\n`);
      results.push(result);
    }
    reports.push({ lab: lab.name, results, notes: [syncDurationNote(lab.daemonLogs())] });
  } finally {
    await lab.destroy();
  }
}
process.stdout.write(values.json ? `${JSON.stringify(reports, null, 2)}\n` : formatComparison(reports));
process.exitCode = reports.every((r) => r.results.every((s) => s.passed)) ? 0 : 1;
