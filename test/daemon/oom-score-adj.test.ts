// oomScoreAdj at start: written when the process may, and a refusal is a value (logged once by run),
// not a crash. The kernel's answers are its own, each in a child process (its score only): a raise
// is free, a lower score needs CAP_SYS_RESOURCE (setpriv drops it from a root child's bounding set).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { applyOomScoreAdj } from '../../src/daemon/oom-score-adj.ts';

const execFileAsync = promisify(execFile);

test('writes the score into <proc>/self/oom_score_adj and says what it was', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'kproxy-proc-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'self'));
  await writeFile(join(root, 'self', 'oom_score_adj'), '0\n');
  assert.deepEqual(await applyOomScoreAdj(-999, root), { applied: true, from: 0, to: -999 });
  assert.equal(await readFile(join(root, 'self', 'oom_score_adj'), 'utf8'), '-999\n');
});

test('a /proc without the file is a refusal with its reason, not a throw', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'kproxy-proc-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const result = await applyOomScoreAdj(-999, root);
  assert.equal(result.applied, false);
  assert.match(result.applied ? '' : result.reason, /self\/oom_score_adj: ENOENT$/);
});

/** CAP_SYS_RESOURCE (bit 24) in this process' effective set: containers often lack it, even as root. */
async function hasSysResource(): Promise<boolean> {
  const status = await readFile('/proc/self/status', 'utf8');
  const effective = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1] ?? '0'}`);
  return (effective & (1n << 24n)) !== 0n;
}

/** Runs applyOomScoreAdj(value, '/proc') in a child, without CAP_SYS_RESOURCE when `drop`. */
async function inChild(value: number, drop: boolean): Promise<{ result: unknown; after: number }> {
  const module = fileURLToPath(new URL('../../src/daemon/oom-score-adj.ts', import.meta.url));
  const script = `import { applyOomScoreAdj } from ${JSON.stringify(module)};
import { readFileSync } from 'node:fs';
const result = await applyOomScoreAdj(${value}, '/proc');
console.log(JSON.stringify({ result, after: Number(readFileSync('/proc/self/oom_score_adj', 'utf8')) }));`;
  const node = [process.execPath, '--input-type=module', '-e', script];
  const argv = drop
    ? ['setpriv', '--bounding-set=-sys_resource', '--inh-caps=-sys_resource', '--', ...node]
    : node;
  const { stdout } = await execFileAsync(argv[0]!, argv.slice(1));
  return JSON.parse(stdout) as { result: unknown; after: number };
}

/** The score children start with: this process'. */
const ownScore = async () => Number(await readFile('/proc/self/oom_score_adj', 'utf8'));

test('the kernel: a higher score needs no privilege and is applied', async (t) => {
  const own = await ownScore();
  if (own === 1000) return t.skip('this process already has the highest score');
  assert.deepEqual(await inChild(own + 1, false), {
    result: { applied: true, from: own, to: own + 1 },
    after: own + 1,
  });
});

test('the kernel: a lower score without CAP_SYS_RESOURCE is refused, and the score stays', async (t) => {
  const own = await ownScore();
  if (own === -1000) return t.skip('this process already has the lowest score');
  // Dropping a capability from the bounding set needs root; without it the child lacks it anyway.
  const drop = (await hasSysResource()) && process.getuid?.() === 0;
  const refused = await inChild(own - 1, drop);
  assert.equal(refused.after, own);
  assert.match(
    JSON.stringify(refused.result),
    /"applied":false.*oom_score_adj: EACCES \(a lower score needs CAP_SYS_RESOURCE\)/,
  );
});

test('the kernel: a lower score with CAP_SYS_RESOURCE is applied', async (t) => {
  if (!(await hasSysResource())) return t.skip('no CAP_SYS_RESOURCE here (a container without it)');
  const own = await ownScore();
  if (own === -1000) return t.skip('this process already has the lowest score');
  assert.deepEqual(await inChild(own - 1, false), {
    result: { applied: true, from: own, to: own - 1 },
    after: own - 1,
  });
});
