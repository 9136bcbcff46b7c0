// `npm run lab`: every scenario against a lab, once per mode, then the comparison table.
//   node lab/main.ts [--modes nftables,iptables,ipvs] [--nodes 2] [--pods-per-node 2] [--json]
//   node lab/main.ts --lab vagrant --vagrant-dir vagrant [--modes nftables,iptables,ipvs]
// The netns lab needs root (it creates network namespaces, and changes nothing outside them); a
// mode this kernel cannot run (IPVS without ip_vs) runs the same netns lab inside the qemu VM
// (harness/vm.ts), which hands its column back with --json-file. The Vagrant lab needs the VMs of
// vagrant/Vagrantfile up. Exit status 1 when a check failed.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { DataplaneMode } from '../contract/dataplane.ts';
import { kernelRuns, runInVm, vmShareDir } from '../harness/vm.ts';
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
    modes: { type: 'string', default: LIVE_MODES.join(',') },
    nodes: { type: 'string', default: '2' },
    'pods-per-node': { type: 'string', default: '2' },
    'vagrant-dir': { type: 'string', default: 'vagrant' },
    json: { type: 'boolean', default: false },
    /** Writes the reports as JSON to this file instead of printing them: how the VM hands its column back. */
    'json-file': { type: 'string' },
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

async function netnsReport(mode: DataplaneMode): Promise<LabReport> {
  process.stderr.write(`lab: starting the netns lab for ${mode}\n`);
  const lab = await NetnsLab.start({
    mode,
    nodes: Number(values.nodes),
    podsPerNode: Number(values['pods-per-node']),
  });
  process.stderr.write(`lab: while it runs, kubectl reaches it with: ${lab.kubectl}\n`);
  try {
    const results = await runAll(lab);
    return { lab: lab.name, results, notes: [syncDurationNote(lab.daemonLogs())] };
  } finally {
    await lab.destroy();
  }
}

/**
 * Bounds a hang of the VM run: a boot (~20-40 s under TCG), then per mode the lab's start and its
 * scenarios, which take several minutes emulated (15 min seen on a 2-core machine at load ~9:
 * each probe starts a process).
 */
const VM_DEADLINE_MS = 25 * 60_000;

/** The netns lab for `vmModes` inside the qemu VM, in one boot; its progress goes to stderr. */
async function vmReports(vmModes: readonly DataplaneMode[]): Promise<LabReport[]> {
  process.stderr.write(
    `lab: ${vmModes.join(', ')}: not in this kernel; booting the qemu VM to run the netns lab there\n`,
  );
  const dir = await vmShareDir();
  try {
    const file = join(dir, 'reports.json');
    const run = await runInVm(
      process.execPath,
      [
        'lab/main.ts',
        '--modes',
        vmModes.join(','),
        '--nodes',
        values.nodes,
        '--pods-per-node',
        values['pods-per-node'],
        '--json-file',
        file,
      ],
      {
        timeoutMs: VM_DEADLINE_MS,
        shareDir: dir,
        onOutput: (text) => process.stderr.write(text.replaceAll('\r', '')),
      },
    );
    process.stderr.write(`lab: the VM run took ${Math.round(run.durationMs / 1000)} s (boot included)\n`);
    const reports = await readFile(file, 'utf8').then(
      (text) => JSON.parse(text) as LabReport[],
      () => undefined,
    );
    if (reports) return reports;
    // No column came back: every scenario fails with the reason, so the table still shows the mode.
    const error = `the VM run ended without a report (exit ${run.exitCode}); its output is above`;
    return vmModes.map((mode) => ({
      lab: `netns/${mode}`,
      results: ALL_SCENARIOS.map((s) => ({
        scenario: s.name,
        passed: false,
        checks: [],
        convergeMs: [],
        error,
      })),
    }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function netnsReports(): Promise<LabReport[]> {
  if (process.getuid?.() !== 0) fail('the netns lab needs root to create network namespaces');
  const inVm = modes.filter((m) => !kernelRuns(m));
  const vm = inVm.length > 0 ? await vmReports(inVm) : [];
  const reports: LabReport[] = [];
  for (const mode of modes) {
    reports.push(kernelRuns(mode) ? await netnsReport(mode) : vm.find((r) => r.lab === `netns/${mode}`)!);
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
if (values['json-file']) await writeFile(values['json-file'], JSON.stringify(reports));
else process.stdout.write(values.json ? `${JSON.stringify(reports, null, 2)}\n` : formatComparison(reports));
process.exitCode = reports.every((r) => r.results.every((s) => s.passed)) ? 0 : 1;
