// `kproxy render` with broken inputs: each ends with exit 1 (or 2 for a wrong command line) and one
// clear line on stderr naming the file, never a stack trace and never a partial ruleset on stdout.
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/cli/broken-inputs.test.ts --name 'binary garbage'
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { MAX_YAML_BYTES } from '../../src/sources/parse-documents.ts';
import { prng } from '../support/prng.ts';
import { testSeeds } from '../support/seeds.ts';
import { captureIO } from './capture-io.ts';

const NODE = ['--node', 'node-1', '--node-ip', '192.168.10.11'];
const CONFIG_HEADER = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kproxy-broken-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

async function render(args: string[]) {
  const captured = captureIO();
  const code = await main(['render', ...args], captured.io);
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}

function assertOneLineError(
  result: { code: number; stdout: string; stderr: string },
  code: number,
  pattern: RegExp,
) {
  assert.equal(result.code, code, result.stderr);
  assert.equal(result.stdout, '', 'nothing rendered');
  const lines = result.stderr.trimEnd().split('\n');
  assert.ok(lines.length <= 2, `one line (and at most a usage hint): ${result.stderr}`);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
}

/** An alias bomb: each level refers to the one below ten times (10^9 nodes if expanded). */
function yamlBomb(): string {
  const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
  for (let i = 1; i < 10; i++)
    lines.push(
      `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return `${lines.join('\n')}\n`;
}

test('binary garbage as input: exit 1 with file:line (seeded, seed printed)', async () => {
  for (const seed of testSeeds({ first: 7 })) {
    const random = prng(seed);
    for (let i = 0; i < 20; i++) {
      const bytes = Buffer.from(Array.from({ length: 2048 }, () => Math.floor(random() * 256)));
      const path = await write(`garbage-${seed}-${i}.yaml`, bytes);
      const result = await render(['--input', path, ...NODE]);
      // Garbage may happen to be a valid YAML scalar: then it is one skipped object, not a crash.
      if (result.code === 0) {
        assert.doesNotMatch(result.stderr, /\n\s+at /, `seed ${seed} #${i}`);
        continue;
      }
      assertOneLineError(result, 1, new RegExp(`^kproxy render: ${path}(:\\d+)?: `));
    }
  }
});

test('a YAML alias bomb is refused with file:line, as input and as config', async () => {
  const path = await write('bomb.yaml', yamlBomb());
  assertOneLineError(await render(['--input', path, ...NODE]), 1, /bomb\.yaml:1: .*alias/i);
  assertOneLineError(await render(['--example', '--config', path]), 1, /bomb\.yaml:1: .*alias/i);
});

test('YAML larger than the parser can hold is refused in one line', async () => {
  const item =
    '- {apiVersion: v1, kind: Service, metadata: {name: s, namespace: default}, spec: {ports: [{port: 80}]}}\n';
  const path = await write(
    'big.yaml',
    `apiVersion: v1\nkind: List\nitems:\n${item.repeat(MAX_YAML_BYTES / item.length + 1)}`,
  );
  assertOneLineError(await render(['--input', path, ...NODE]), 1, /big\.yaml: \d+ MiB of YAML .* -o json/);
});

test('nested arrays and cyclic aliases are skipped objects, not a stack overflow', async () => {
  const deep = await write('deep.json', `${'['.repeat(200_000)}${']'.repeat(200_000)}`);
  const cyclic = await write('cyclic.yaml', '- &a [*a]\n');
  for (const path of [deep, cyclic]) {
    const result = await render(['--input', path, ...NODE, '--strict']);
    assertOneLineError({ ...result, stderr: result.stderr.split('\n').slice(1).join('\n') }, 1, /--strict/);
    assert.match(result.stderr, /^warning: .* skipped: expected an object/);
  }
});

test('a directory without input files, a missing file and a missing --config value are one line each', async () => {
  const empty = join(dir, 'no-yaml');
  await mkdir(empty);
  await writeFile(join(empty, 'notes.txt'), 'not an input');
  assertOneLineError(await render(['--input', empty, ...NODE]), 1, /no-yaml: directory has no \.yaml/);
  assertOneLineError(await render(['--input', join(dir, 'absent.yaml'), ...NODE]), 1, /no such file/);
  assertOneLineError(await render(['--example', '--config', join(dir, 'absent.yaml')]), 1, /no such file/);
  assertOneLineError(await render(['--example', '--config']), 2, /--config/);
});

test('a config with wrong types names the file and the field', async () => {
  const cases: [string, RegExp][] = [
    ['mode: 5', /mode: 5 is not a string/],
    ['nftables: 5', /nftables: 5 is not a mapping/],
    ['nodeIPs: [5]', /nodeIPs: \[5\] is not a list of strings/],
    ['iptables: {masqueradeBit: 99}', /iptables\.masqueradeBit: 99 is out of range/],
    ['conntrack: {maxPerCore: "x"}', /conntrack\.maxPerCore: "x" is not an integer/],
    ['nftables: {syncPeriod: 7}', /nftables\.syncPeriod: 7 is not a duration/],
  ];
  for (const [i, [body, pattern]] of cases.entries()) {
    const path = await write(`config-${i}.yaml`, `${CONFIG_HEADER}${body}\n`);
    assertOneLineError(await render(['--example', '--config', path]), 1, pattern);
  }
  const garbage = await write('config-garbage.yaml', '\u0000\u0001{{{: :');
  assertOneLineError(await render(['--example', '--config', garbage]), 1, /config-garbage\.yaml/);
});
