// `npm run bench` (as root; about 5–10 minutes on a 2-core machine, plus ~25 min for the ipvs
// section, which boots the emulated qemu VM when this kernel has no ip_vs): each section runs in
// its own child process (so its memory figures are its own) and prints its figures; this driver
// prints one table of figures and ratios against the targets, the scaling curve per mode (the
// nftables and iptables sections run once per size and once for one wide Service, the ipvs
// section all of its --ipvs-services sizes and the wide Service in its one VM boot), and writes
// every raw figure as JSON and the curve as an SVG chart beside it (same name, .svg).
//   node bench/main.ts [--out FILE] [--sizes 1000,10000,30000] [--wide-endpoints 100000]
//     [--nft-services 30000] [--ipt-services 10000] [--ipvs-services 1000,10000,30000] [--only a,b]
//     [--quick]   (the smallest size only, no ipvs, daemon, churn or rollout section: under 3 minutes)
// The kubeproxyshape section (kube-proxy's rulesets at the iptables section's size) takes ~5 min
// at 10,000 services, churn ~3 min (a 10,000-service daemon's cold start, then 60 s of changes),
// rollout one run per mode (nftables, iptables), each a 30,000-service daemon's cold start, 60 s
// of 1,000 Deployments rolled at once and the ruleset read back.
//     [--node-flags="--max-semi-space-size=16"]   (V8 flags for the section children; note the =)
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BenchRun, benchPlan, parseBenchArgs, sectionFigures } from './bench-plan.ts';
import { curveFailures, curveFallbacks, curvePoints, curveSvg, formatCurveTable } from './curve.ts';
import { type BenchFigures, benchRows, formatTable } from './report.ts';

const options = parseBenchArgs(process.argv.slice(2));
const jsonFile = options.out ?? join(tmpdir(), `kproxy-bench-${Date.now()}.json`);
if (process.getuid?.() !== 0) {
  console.error('bench: needs root (network namespaces, nft, iptables-restore)');
  process.exit(2);
}

const here = import.meta.dirname;

/** Runs a section; its figures are the last JSON line it prints (informer-memory prints plain JSON). */
function runSection({ section, script, args }: BenchRun): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    process.stderr.write(`bench: ${section} ${args.join(' ')} ...\n`);
    const nodeFlags = options.nodeFlags.split(' ').filter((flag) => flag !== '');
    const child = spawn(process.execPath, ['--expose-gc', ...nodeFlags, join(here, script), ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out
        .trim()
        .split('\n')
        .reverse()
        .find((l) => l.startsWith('BENCH-RESULT ') || l.startsWith('{'));
      process.stderr.write(`bench: ${section} done in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
      if (line === undefined) {
        reject(new Error(`${section}: no figures (exit ${code})`));
        return;
      }
      const figures = JSON.parse(line.replace(/^BENCH-RESULT /, '')) as Record<string, unknown>;
      resolve(code === 0 ? figures : { ...figures, exitCode: code });
    });
  });
}

const results: { run: BenchRun; figures: Record<string, unknown> }[] = [];
const failures: string[] = [];
for (const run of benchPlan(options)) {
  try {
    results.push({ run, figures: await runSection(run) });
  } catch (error) {
    failures.push(`${run.section} ${run.args.join(' ')}: ${(error as Error).message}`);
  }
}
const figures = sectionFigures(options, results) as BenchFigures;

const report = {
  date: new Date().toISOString(),
  nodeFlags: options.nodeFlags,
  machine: { cpus: (await import('node:os')).cpus().length, load: (await import('node:os')).loadavg() },
  figures,
  failures,
};
writeFileSync(jsonFile, `${JSON.stringify(report, null, 2)}\n`);
const chart = `${jsonFile.replace(/\.json$/, '')}.svg`;
writeFileSync(chart, curveSvg(curvePoints(figures)));
console.log(formatTable(benchRows(figures)));
console.log(`\n${formatCurveTable(curvePoints(figures))}`);
for (const note of [...curveFailures(figures), ...curveFallbacks(figures)]) console.log(`curve: ${note}`);
for (const failure of failures) console.log(`FAILED ${failure}`);
console.log(`raw figures: ${jsonFile}\ncurve: ${chart}`);
process.exitCode = failures.length > 0 ? 1 : 0;
