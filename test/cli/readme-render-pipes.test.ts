// The README's render pipes, run exactly as README.md writes them (read from its text here, so the
// README cannot drift from what is tested): on an empty network namespace, each leaves what a full
// sync of `kproxy run` leaves in another one (nftables: the ruleset; iptables: every table of both
// families and the nfacct objects run makes at start, by run's own code). IPVS needs ip_vs, which
// the host kernel may lack: here its script's shape (each of render's inputs fed to the tool its
// header names, in order); test/dataplanes/ipvs/vm/live.vmtest.ts loads those inputs with those
// tools on a kernel with IPVS and compares them with a full sync.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { SCRIPT_PREAMBLE } from '../../contract/tool-inputs.ts';
import type { IptablesBackend } from '../../dataplanes/iptables/backend.ts';
import { IptablesDataplane } from '../../dataplanes/iptables/live.ts';
import { NftablesDataplane } from '../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { openRunCountersIn } from '../../harness/nfacct-counters.ts';
import { buildState, FAMILY_FLAG, withRenderNodeName } from '../../src/cli/render.ts';
import { loadProxyConfig } from '../../src/config/config.ts';
import { EXAMPLE_CLUSTER_PATH, EXAMPLE_CONFIG_PATH } from '../../src/sources/example-cluster.ts';
import { readObjects } from '../../src/sources/read-objects.ts';
import { normalisedSave } from '../dataplanes/iptables/saved-tables.ts';
import { canonicalRuleset } from '../dataplanes/nftables/kernel-support.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** The command lines of the README's sh blocks that pipe a render into a shell, as written. */
function readmePipes(): Map<string, string> {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const pipes = new Map<string, string>();
  for (const [, block] of readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    for (const line of block!.split('\n').filter((l) => /\bkproxy\b.* render .*\| sh$/.test(l))) {
      const mode = /--mode (\S+)/.exec(line)?.[1];
      assert.ok(mode !== undefined && !pipes.has(mode), `README pipe without a mode of its own: ${line}`);
      pipes.set(mode, line);
    }
  }
  return pipes;
}

const PIPES = readmePipes();

/** Runs a README line as a person would: with sh, from the repository, in the namespace. */
async function runInNamespace(ns: string, line: string): Promise<void> {
  await execa('ip', ['netns', 'exec', ns, 'sh', '-c', line], { cwd: REPO });
}

/** The state the line renders (its mode and --family, the bundled example), built as render builds it. */
async function renderedState(line: string): Promise<DualStackState> {
  assert.match(line, / --example\b/, 'a README pipe renders the bundled example');
  const mode = /--mode (\S+)/.exec(line)![1]!;
  const families = FAMILY_FLAG[/--family (\S+)/.exec(line)?.[1] ?? 'both']!;
  const loaded = await loadProxyConfig(
    { config: EXAMPLE_CONFIG_PATH, 'proxy-mode': mode },
    { readFile: (path) => readFile(path, 'utf8'), hostname: 'not-a-node-of-the-example' },
  );
  assert.ok(loaded.ok);
  const read = await readObjects([EXAMPLE_CLUSTER_PATH], async () => '');
  assert.ok(read.ok);
  return buildState(read.objects, withRenderNodeName(loaded.config, read.objects), families).state;
}

test('the README has a render pipe for every mode', () => {
  assert.deepEqual([...PIPES.keys()].sort(), ['iptables', 'ipvs', 'nftables']);
});

test("the README's other render lines of the bundled example print their rules as written", async () => {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const lines = [
    ...readme.matchAll(
      /^(npm ci && )?(npm run --silent kproxy -- render [^|#\n]*--example[^|#\n]*?)\s*(#.*)?$/gm,
    ),
  ];
  assert.ok(lines.length >= 3, `${lines.length} lines`);
  for (const [, , line] of lines) {
    const { stdout } = await execa('sh', ['-c', line!], { cwd: REPO });
    assert.match(stdout, /KPROXY-SERVICES|add table ip kproxy|ipvsadm --restore|-A -t /, line);
  }
});

test('the README nftables pipe on an empty namespace leaves the ruleset of a full sync', async (t) => {
  if (!requireRoot(t, 'network namespaces and nft')) return;
  const lab = new Lab('readme-nft');
  t.after(() => lab.destroy());
  const [piped, synced] = [await lab.addNetns('piped'), await lab.addNetns('synced')];
  await runInNamespace(piped, PIPES.get('nftables')!);
  const commands = execaRunner(['ip', 'netns', 'exec', synced]);
  const live = new NftablesDataplane({ nft: commandNftRunner(commands), commands });
  await live.start();
  await live.sync(await renderedState(PIPES.get('nftables')!), 'full');
  const expected = await canonicalRuleset(lab, synced);
  assert.notDeepEqual(expected, await canonicalRuleset(lab, await lab.addNetns('empty')));
  assert.deepEqual(await canonicalRuleset(lab, piped), expected);
});

/** The backend `iptables-restore` stands for on this machine (its Debian alternative). */
async function systemBackend(): Promise<IptablesBackend> {
  const { stdout } = await execa('iptables-restore', ['--version']);
  return stdout.includes('nf_tables') ? 'nft' : 'legacy';
}

test('the README iptables pipe on an empty namespace leaves the tables and nfacct objects of kproxy run', async (t) => {
  if (!requireRoot(t, 'network namespaces, iptables and nfacct')) return;
  const lab = new Lab('readme-ipt');
  t.after(() => lab.destroy());
  const [piped, synced] = [await lab.addNetns('piped'), await lab.addNetns('synced')];
  await runInNamespace(piped, PIPES.get('iptables')!);
  // kproxy run's steps: its nfacct objects at start (its own code), then the dataplane's full sync.
  const backend = await systemBackend();
  await openRunCountersIn(lab, synced);
  const live = new IptablesDataplane({ runner: execaRunner(['ip', 'netns', 'exec', synced]), backend });
  await live.start();
  await live.sync(await renderedState(PIPES.get('iptables')!), 'full');
  const nfacct = async (ns: string) => (await lab.exec(ns, 'nfacct', ['list'])).stdout;
  assert.match(await nfacct(synced), /ct_state_invalid_dropped_pkts/);
  assert.equal(await nfacct(piped), await nfacct(synced));
  for (const family of ['IPv4', 'IPv6'] as const) {
    const expected = await normalisedSave(lab, synced, backend, family);
    if (family === 'IPv4') assert.match(expected, /-m nfacct --nfacct-name +ct_state_invalid_dropped_pkts/);
    assert.equal(await normalisedSave(lab, piped, backend, family), expected, family);
  }
});

test("the README IPVS pipe's script feeds each input render prints to the tool its header names, in order", async () => {
  const line = PIPES.get('ipvs')!;
  // The render alone, as written up to the pipe (it touches nothing), and without --script.
  const render = line.replace(/\s*\|\s*sh$/, '');
  const script = (await execa('sh', ['-c', render], { cwd: REPO })).stdout;
  const sections = (await execa('sh', ['-c', render.replace(' --script', '')], { cwd: REPO })).stdout;
  const tools: Readonly<Record<string, string>> = {
    'ip -batch': 'ip -batch -',
    'ipvsadm --restore': 'ipvsadm --restore',
    'nft -f': 'nft -f -',
  };
  const expected = [SCRIPT_PREAMBLE.trimEnd()];
  for (const section of `${sections}\n`.split(/^(?=# )/m)) {
    const newline = section.indexOf('\n');
    const header = section.slice(0, newline);
    const tool = tools[/; ([^;]+)\)$/.exec(header)?.[1] ?? ''];
    assert.ok(tool !== undefined, `a header naming its tool: ${header}`);
    expected.push(header, `${tool} <<'KPROXY_INPUT_END'`, `${section.slice(newline + 1)}KPROXY_INPUT_END`);
  }
  assert.deepEqual(expected.length, 1 + 3 * 3);
  assert.equal(script, expected.join('\n'));
});
