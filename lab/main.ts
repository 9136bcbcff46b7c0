// `npm run lab`: every scenario against a lab, once per mode, then the comparison table.
//   node lab/main.ts [--modes nftables,iptables] [--nodes 2] [--pods-per-node 2] [--json]
//   node lab/main.ts --lab vagrant --vagrant-dir vagrant [--modes nftables,iptables,ipvs]
// The netns lab needs root (it creates network namespaces, and changes nothing outside them); the
// Vagrant lab needs the VMs of vagrant/Vagrantfile up. Exit status 1 when a check failed.
import { parseArgs } from 'node:util';
import type { DataplaneMode } from '../dataplanes/shared/dataplane.ts';
import { LIVE_MODES } from '../src/daemon/live-dataplanes.ts';
import type { LabDriver } from './driver.ts';
import { NetnsLab } from './netns-lab.ts';
import { sshShell } from './remote-shell.ts';
import { formatComparison, type LabReport } from './report.ts';
import { ALL_SCENARIOS } from './scenarios/all.ts';
import { runScenario, type ScenarioResult } from './scenarios/scenario.ts';
import { syncDurationNote } from './sync-durations.ts';
import { VagrantLab } from './vagrant-lab.ts';

const { values } = parseArgs({
  options: {
    lab: { type: 'string', default: 'netns' },
    modes: { type: 'string', default: 'nftables,iptables' },
    nodes: { type: 'string', default: '2' },
    'pods-per-node': { type: 'string', default: '2' },
    'vagrant-dir': { type: 'string', default: 'vagrant' },
    json: { type: 'boolean', default: false },
  },
});

function fail(message: string): never {
  console.error(`lab: ${message}`);
  process.exit(2);
}

if (values.lab !== 'netns' && values.lab !== 'vagrant') fail(`--lab ${values.lab}: netns or vagrant`);
/** Modes the VMs can run: IPVS too, as they have real kernels with ip_vs. */
const VAGRANT_MODES: readonly DataplaneMode[] = ['nftables', 'iptables', 'ipvs'];
const modes = values.modes.split(',').filter(Boolean) as DataplaneMode[];
const allowed = values.lab === 'vagrant' ? VAGRANT_MODES : LIVE_MODES;
const unknown = modes.filter((m) => !allowed.includes(m));
if (unknown.length > 0)
  fail(`--modes ${unknown.join(',')}: the ${values.lab} lab can run ${allowed.join(', ')}`);

async function runAll(lab: LabDriver): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const scenario of ALL_SCENARIOS) {
    const result = await runScenario(lab, scenario);
    process.stderr.write(`lab: ${lab.name} ${scenario.name}: ${result.passed ? 'pass' : 'FAIL'}\n`);
    results.push(result);
  }
  return results;
}

async function netnsReports(): Promise<LabReport[]> {
  if (process.getuid?.() !== 0) fail('the netns lab needs root to create network namespaces');
  const reports: LabReport[] = [];
  for (const mode of modes) {
    process.stderr.write(`lab: starting the netns lab for ${mode}\n`);
    const lab = await NetnsLab.start({
      mode,
      nodes: Number(values.nodes),
      podsPerNode: Number(values['pods-per-node']),
    });
    process.stderr.write(`lab: while it runs, kubectl reaches it with: ${lab.kubectl}\n`);
    try {
      const results = await runAll(lab);
      reports.push({ lab: lab.name, results, notes: [syncDurationNote(lab.daemonLogs())] });
    } finally {
      await lab.destroy();
    }
  }
  return reports;
}

async function vagrantReports(): Promise<LabReport[]> {
  const shell = await sshShell(values['vagrant-dir']);
  const reports: LabReport[] = [];
  try {
    const lab = await VagrantLab.connect(shell);
    for (const mode of modes) {
      process.stderr.write(`lab: switching the Vagrant lab to ${mode}\n`);
      await lab.useMode(mode);
      reports.push({ lab: lab.name, results: await runAll(lab) });
    }
  } finally {
    await shell.close();
  }
  return reports;
}

const reports = values.lab === 'vagrant' ? await vagrantReports() : await netnsReports();
process.stdout.write(values.json ? `${JSON.stringify(reports, null, 2)}\n` : formatComparison(reports));
process.exitCode = reports.every((r) => r.results.every((s) => s.passed)) ? 0 : 1;
