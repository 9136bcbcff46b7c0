// `npm run bench` (as root; about 5–10 minutes on a 2-core machine, plus ~40 min for the ipvs
// section, which boots the emulated qemu VM when this kernel has no ip_vs): each section runs in
// its own child process (so its memory figures are its own) and prints its figures; this driver
// prints one table of figures and ratios against the targets, and writes every raw figure as JSON.
//   node bench/main.ts [--out FILE] [--nft-services 30000] [--ipt-services 10000]
//     [--ipvs-services 10000] [--only a,b]
//     [--node-flags="--max-semi-space-size=16"]   (V8 flags for the section children; note the =)
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type BenchFigures, benchRows, formatTable } from './report.ts';

const SECTIONS = ['model', 'nftables', 'nftaffinity', 'iptables', 'ipvs', 'informer', 'daemon'] as const;
type Section = (typeof SECTIONS)[number];

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: join(tmpdir(), `kproxy-bench-${Date.now()}.json`) },
    'nft-services': { type: 'string', default: '30000' },
    'ipt-services': { type: 'string', default: '10000' },
    'ipvs-services': { type: 'string', default: '10000' },
    only: { type: 'string', default: SECTIONS.join(',') },
    'node-flags': { type: 'string', default: '' },
  },
});
if (process.getuid?.() !== 0) {
  console.error('bench: needs root (network namespaces, nft, iptables-restore)');
  process.exit(2);
}

const here = import.meta.dirname;
const commands: Record<Section, readonly string[]> = {
  model: [join(here, 'model-speed.ts'), '--services', values['nft-services']],
  nftables: [join(here, 'nftables-speed.ts'), '--services', values['nft-services']],
  // ClientIP against plain at 3,000 services (issue 16's figure); --services to change it.
  nftaffinity: [join(here, 'nftables-affinity.ts'), '--services', '3000'],
  iptables: [join(here, 'iptables-speed.ts'), '--services', values['ipt-services']],
  // In the qemu VM when this kernel has no ip_vs (one boot; the section boots it itself).
  ipvs: [join(here, 'ipvs-speed.ts'), '--services', values['ipvs-services']],
  informer: [join(here, 'informer-memory.ts'), '--services', values['nft-services']],
  daemon: [join(here, 'daemon-memory.ts'), '--services', values['nft-services']],
};

/** Runs a section; its figures are the last JSON line it prints (informer-memory prints plain JSON). */
function runSection(section: Section): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    process.stderr.write(`bench: ${section} ...\n`);
    const nodeFlags = values['node-flags'].split(' ').filter((flag) => flag !== '');
    const child = spawn(process.execPath, ['--expose-gc', ...nodeFlags, ...commands[section]], {
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

const wanted = values.only
  .split(',')
  .filter((s): s is Section => (SECTIONS as readonly string[]).includes(s));
const figures: { -readonly [S in Section]?: Record<string, unknown> } = {};
const failures: string[] = [];
for (const section of wanted) {
  try {
    figures[section] = await runSection(section);
  } catch (error) {
    failures.push(`${section}: ${(error as Error).message}`);
  }
}

const report = {
  date: new Date().toISOString(),
  nodeFlags: values['node-flags'],
  machine: { cpus: (await import('node:os')).cpus().length, load: (await import('node:os')).loadavg() },
  figures,
  failures,
};
writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
console.log(formatTable(benchRows(figures as BenchFigures)));
for (const failure of failures) console.log(`FAILED ${failure}`);
console.log(`raw figures: ${values.out}`);
process.exitCode = failures.length > 0 ? 1 : 0;
