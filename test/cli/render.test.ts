import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { PROXY_MODES } from '../../src/config/config-fields.ts';
import { captureIO } from './capture-io.ts';

const EXAMPLE_CONFIG = new URL('../../examples/kube-proxy-config.yaml', import.meta.url).pathname;

async function run(argv: string[], stdin = '') {
  const captured = captureIO(stdin);
  const code = await main(argv, captured.io);
  return { code, stdout: captured.stdout(), stderr: captured.stderr() };
}

const service = (name: string, clusterIP: string, port = 80) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default' },
  spec: {
    type: 'ClusterIP',
    clusterIP,
    clusterIPs: [clusterIP],
    ports: [{ name: 'http', port, protocol: 'TCP' }],
  },
});
const slice = (name: string, ips: string[]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: `${name}-abcde`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
  addressType: 'IPv4',
  endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-1' })),
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});
const list = (...items: unknown[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
const node = ['--node', 'node-1', '--node-ip', '192.168.10.11'];

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kproxy-render-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

test('render --mode nftables --example prints an nftables ruleset for both families', async () => {
  const result = await run(['render', '--mode', 'nftables', '--example']);
  assert.equal(result.stderr, '');
  assert.equal(result.code, 0);
  assert.match(result.stdout, /table ip kproxy/);
  assert.match(result.stdout, /table ip6 kproxy/);
  assert.match(result.stdout, /default\/web:80\/TCP/);
});

test('render --mode iptables --example prints iptables-restore input for both families, no warnings', async () => {
  const result = await run(['render', '--mode', 'iptables', '--example']);
  assert.equal(result.stderr, '');
  assert.equal(result.code, 0);
  assert.match(result.stdout, /^# iptables-restore --noflush input/m);
  assert.match(result.stdout, /^# ip6tables-restore --noflush input/m);
  assert.match(result.stdout, /\*nat/);
  for (const key of [
    'default/web:80/TCP',
    'kube-system/kube-dns:53/UDP',
    'telecom/diameter:3868/SCTP',
    'default/echo-v6:80/TCP',
  ]) {
    assert.ok(result.stdout.includes(key), key);
  }
  for (const skipped of ['shop/postgres', 'shop/payments-provider', 'default/mesh-gateway']) {
    assert.ok(!result.stdout.includes(skipped), `${skipped} must be skipped`);
  }
});

test('--example without --node renders for the example’s first node, node-1', async () => {
  // node-exporter has internalTrafficPolicy Local and runs with host networking on every node.
  const defaultNode = await run(['render', '--mode', 'iptables', '--example', '--family', 'ipv4']);
  assert.match(defaultNode.stdout, /192\.168\.10\.11:9100/);
  assert.doesNotMatch(defaultNode.stdout, /192\.168\.10\.12:9100/);
  const node2 = await run([
    'render',
    '--mode',
    'iptables',
    '--example',
    '--family',
    'ipv4',
    '--node',
    'node-2',
  ]);
  assert.match(node2.stdout, /192\.168\.10\.12:9100/);
  assert.doesNotMatch(node2.stdout, /192\.168\.10\.11:9100/);
});

test('rendering is deterministic: the same input gives the same bytes', async () => {
  const first = await run(['render', '--mode', 'iptables', '--example']);
  const second = await run(['render', '--mode', 'iptables', '--example']);
  assert.equal(first.stdout, second.stdout);
});

test('--family ipv4 leaves out the IPv6 rules', async () => {
  const result = await run(['render', '--mode', 'iptables', '--example', '--family', 'ipv4']);
  assert.equal(result.code, 0);
  assert.doesNotMatch(result.stdout, /ip6tables/);
  assert.doesNotMatch(result.stdout, /fd00:/);
});

test('the example config file works with --example', async () => {
  const result = await run(['render', '--config', EXAMPLE_CONFIG, '--proxy-mode', 'iptables', '--example']);
  assert.equal(result.stderr, '');
  assert.equal(result.code, 0);
  assert.match(result.stdout, /default\/web:80\/TCP/);
});

test('an invalid object is skipped with a warning and the rest is rendered', async () => {
  const bad = service('bad', '10.96.0.99', 70000);
  const path = await write(
    'mixed.json',
    list(service('good', '10.96.0.20'), slice('good', ['10.244.1.5']), bad),
  );
  const result = await run(['render', '--mode', 'iptables', '--input', path, ...node]);
  assert.equal(result.code, 0);
  assert.match(
    result.stderr,
    new RegExp(`^warning: ${path}: Service default/bad skipped: spec\\.ports\\[0\\]\\.port: .*70000`),
  );
  assert.equal(result.stderr.split('\n').length, 2, 'one warning line');
  assert.match(result.stdout, /default\/good:80\/TCP/);
  assert.doesNotMatch(result.stdout, /default\/bad/);
});

test('--strict turns warnings into exit 1 and renders nothing', async () => {
  const path = await write('strict.json', list(service('good', '10.96.0.20'), service('bad', '10.96.0.300')));
  const result = await run(['render', '--mode', 'iptables', '--input', path, '--strict', ...node]);
  assert.equal(result.code, 1);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, /^warning: .*Service default\/bad skipped/m);
  assert.match(result.stderr, /--strict/);
});

test('--strict with clean input exits 0', async () => {
  const path = await write('clean.json', list(service('good', '10.96.0.20'), slice('good', ['10.244.1.5'])));
  const result = await run(['render', '--mode', 'iptables', '--input', path, '--strict', ...node]);
  assert.equal(result.stderr, '');
  assert.equal(result.code, 0);
});

test('a file that does not parse: exit 1, one line with file:line, no stack trace', async () => {
  const path = await write('broken.yaml', 'kind: Service\nmetadata:\n  name: [web\n');
  const result = await run(['render', '--mode', 'iptables', '--input', path]);
  assert.equal(result.code, 1);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, new RegExp(`^kproxy render: ${path}:\\d+: [^\\n]+\\n$`));
});

test('--input - reads the objects from stdin', async () => {
  const stdin = list(service('piped', '10.96.0.21'), slice('piped', ['10.244.1.6']));
  const result = await run(['render', '--mode', 'iptables', '--input', '-', ...node], stdin);
  assert.equal(result.code, 0);
  assert.match(result.stdout, /default\/piped:80\/TCP/);
});

test('--since prints the incremental update, which differs from the full ruleset', async () => {
  const old = await write('old.json', list(service('web', '10.96.0.20'), slice('web', ['10.244.1.5'])));
  const next = await write(
    'new.json',
    list(service('web', '10.96.0.20'), slice('web', ['10.244.1.5', '10.244.1.6'])),
  );
  const full = await run(['render', '--mode', 'iptables', '--input', next, ...node]);
  const incremental = await run(['render', '--mode', 'iptables', '--input', next, '--since', old, ...node]);
  assert.equal(incremental.code, 0);
  assert.match(incremental.stdout, /incremental/);
  assert.match(incremental.stdout, /10\.244\.1\.6/);
  assert.notEqual(incremental.stdout, full.stdout);
});

test('--since prints a change over the round budget in the rounds kproxy run applies it in, smallest first', async () => {
  // 75 Services × 100 endpoints (7,575 endpoints, over ROUND_BUDGET) appear while a small one changes.
  const names = Array.from({ length: 75 }, (_, i) => `s${i}`);
  const endpoints = (i: number) => Array.from({ length: 100 }, (_, e) => `10.245.${i}.${e + 1}`);
  const old = await write(
    'rounds-old.json',
    list(service('small', '10.96.200.1'), slice('small', ['10.244.200.1'])),
  );
  const next = await write(
    'rounds-new.json',
    list(
      service('small', '10.96.200.1'),
      slice('small', ['10.244.200.2']),
      ...names.map((name, i) => service(name, `10.96.100.${i + 1}`)),
      ...names.map((name, i) => slice(name, endpoints(i))),
    ),
  );
  const args = ['render', '--mode', 'iptables', '--family', 'ipv4', '--input', next, '--since', old, ...node];
  const result = await run(args);
  assert.equal(result.code, 0, result.stderr);
  const rounds = result.stdout.split(/^(?=# sync round )/m);
  assert.deepEqual(
    rounds.map((round) => round.split('\n')[0]),
    [
      '# sync round 1/2: 70 service ports (a change over 7000 endpoints is applied in rounds, cheapest ports first)',
      '# sync round 2/2: 6 service ports (a change over 7000 endpoints is applied in rounds, cheapest ports first)',
    ],
  );
  assert.match(rounds[0]!, /10\.244\.200\.2/, 'the small change in the first round');
  assert.match(rounds[1]!, /default\/s9:80\/TCP/);
  assert.doesNotMatch(rounds[1]!, /10\.244\.200\./, 'nothing of the small Service’s endpoints');
  // Each round is an incremental restore input of its own.
  for (const round of rounds) assert.match(round, /^# iptables-restore --noflush input \(incremental[;)]/m);
});

test('usage errors exit 2 with one clear line', async () => {
  const cases: [string[], RegExp][] = [
    [['render', '--mode', 'iptables'], /no input/],
    [['render', '--example', '--bogus'], /unknown flag: --bogus/],
    [['render', '--example', '--family', 'ipv5'], /--family: "ipv5" is not ipv4, ipv6 or both/],
    [['render', '--example', '--mode', 'pf'], /--proxy-mode: "pf" is not one of iptables, nftables, ipvs/],
    [['render', '--example', '--mode', 'iptables', '--proxy-mode', 'nftables'], /disagree/],
    [['render', 'stray'], /takes no arguments, got "stray"/],
  ];
  for (const [argv, message] of cases) {
    const result = await run(argv);
    assert.equal(result.code, 2, argv.join(' '));
    assert.match(result.stderr, message);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  }
});

test('a missing input file or config file is exit 1 naming it', async () => {
  const missing = join(dir, 'missing.yaml');
  const input = await run(['render', '--mode', 'iptables', '--input', missing]);
  assert.deepEqual([input.code, input.stderr], [1, `kproxy render: ${missing}: no such file or directory\n`]);
  const config = await run(['render', '--example', '--config', missing]);
  assert.deepEqual(
    [config.code, config.stderr],
    [1, `kproxy render: ${missing}: no such file or directory\n`],
  );
});

test('render --mode ipvs prints the virtual servers, addresses and companion rules, with the configured scheduler', async () => {
  const result = await run(['render', '--mode', 'ipvs', '--example', '--family', 'ipv4']);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /-A -t 10\.96\.0\.10:53 -s rr/);
  assert.match(result.stdout, /table ip kproxy-ipvs/);
  const config = join(dir, 'ipvs-config.yaml');
  await writeFile(
    config,
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: node-1\nipvs:\n  scheduler: lc\n',
  );
  const withScheduler = await run([
    'render',
    '--mode',
    'ipvs',
    '--example',
    '--family',
    'ipv4',
    '--config',
    config,
  ]);
  assert.equal(withScheduler.code, 0, withScheduler.stderr);
  assert.match(withScheduler.stdout, /-A -t 10\.96\.0\.10:53 -s lc/);
});

test('render --mode iptables --chunks prints the restores iptables-nft gets, which render announces', async () => {
  // 600 services with one endpoint each: 1,200 service chains, over the 1,000 one input takes.
  const names = Array.from({ length: 600 }, (_, i) => `s${i}`);
  const path = await write(
    'large.json',
    list(
      ...names.map((name, i) => service(name, `10.96.${i >> 8}.${i & 255}`)),
      ...names.map((name, i) => slice(name, [`10.244.${i >> 8}.${i & 255}`])),
    ),
  );
  const args = ['render', '--mode', 'iptables', '--family', 'ipv4', '--input', path, ...node];
  const whole = await run(args);
  assert.equal(whole.code, 0, whole.stderr);
  // First the nfacct objects kproxy run makes before its first restore.
  const nfacct =
    '# nfacct objects, made before the first restore (nfacct add; kproxy run makes them over netlink)';
  // Two parts of service chains, then the shared chains, filter, mangle and the jumps.
  assert.deepEqual(whole.stdout.match(/^# .*$/gm), [
    nfacct,
    '# iptables-restore --noflush input (full; iptables-nft sends it as 3 inputs: render --chunks)',
  ]);
  const chunked = await run([...args, '--chunks']);
  assert.equal(chunked.code, 0, chunked.stderr);
  assert.deepEqual(chunked.stdout.match(/^# .*$/gm), [
    nfacct,
    '# iptables-restore --noflush input 1/3 (full; iptables-nft)',
    '# iptables-restore --noflush input 2/3 (full; iptables-nft)',
    '# iptables-restore --noflush input 3/3 (full; iptables-nft)',
  ]);
  // The same rules, split: every line of the whole input is in one of the parts.
  const lines = (text: string) => new Set(text.split('\n').filter((l) => l.startsWith('-')));
  assert.deepEqual(lines(chunked.stdout), lines(whole.stdout));
});

test("render --mode ipvs --chunks prints the companion table's cold start steps, which render joins", async () => {
  const args = ['render', '--mode', 'ipvs', '--example'];
  const whole = await run(args);
  assert.equal(whole.code, 0, whole.stderr);
  const chunked = await run([...args, '--chunks']);
  assert.equal(chunked.code, 0, chunked.stderr);
  const sections = (text: string) => text.split(/^(?=# )/m);
  const [addresses, servers, companion] = sections(whole.stdout);
  assert.equal(
    companion!.split('\n')[0],
    '# nftables companion table (full, on an empty node in 3 steps: render --chunks; nft -f)',
  );
  const steps = sections(chunked.stdout);
  assert.deepEqual(steps.slice(0, 2), [addresses, servers]);
  assert.deepEqual(
    steps.slice(2).map((step) => step.split('\n')[0]),
    [
      '# nftables companion table (full, step 1/3: table, sets, regular chains; nft -f)',
      '# nftables companion table (full, step 2/3: elements, by nf_tables netlink in kproxy run; nft -f)',
      '# nftables companion table (full, step 3/3: the hooks; nft -f)',
    ],
  );
  const body = (section: string) => section.slice(section.indexOf('\n') + 1);
  assert.equal(steps.slice(2).map(body).join(''), body(companion!));
  assert.match(body(steps[3]!), /^add element /);
  assert.doesNotMatch(body(steps[3]!), /^(?!add element |\t|\}|$)/m, 'elements only');
  assert.doesNotMatch(body(steps[2]!), /hook/, 'no base chain before the elements');
  assert.match(body(steps[4]!), /^add chain ip kproxy-ipvs nat-prerouting \{ type nat hook prerouting/m);
});

test('render --mode nftables --chunks prints each transaction the live dataplane sends under a # line', async () => {
  const args = ['render', '--mode', 'nftables', '--example', '--family', 'ipv4'];
  const whole = await run(args);
  assert.equal(whole.code, 0, whole.stderr);
  assert.doesNotMatch(whole.stdout, /^#/m, 'one transaction: no note');
  assert.ok(
    whole.stdout.endsWith('\nadd element ip kproxy canary { 1 }\n'),
    "the first full sync's canary, last",
  );
  const chunked = await run([...args, '--chunks']);
  assert.equal(chunked.code, 0, chunked.stderr);
  // Below 100,000 elements a full sync on an empty node is one transaction.
  assert.equal(chunked.stdout, `# nft -f transaction 1/1 (one-transaction)\n${whole.stdout}`);
});

test('render --help documents the flags', async () => {
  const result = await run(['render', '--help']);
  assert.equal(result.code, 0);
  for (const flag of [
    '--input',
    '--example',
    '--since',
    '--chunks',
    '--strict',
    '--family',
    '--cluster-cidr',
    '--node-ip',
  ]) {
    assert.ok(result.stdout.includes(flag), flag);
  }
});

test('render --help names every mode the configuration accepts, and each one renders (ipvs was missing)', async () => {
  const help = await run(['render', '--help']);
  const usage = help.stdout.split('\n')[0] ?? '';
  const modeLine = help.stdout.split('\n').find((line) => line.trimStart().startsWith('--mode MODE'));
  for (const mode of PROXY_MODES) {
    assert.ok(usage.includes(mode), `usage line names ${mode}`);
    assert.ok(modeLine?.includes(mode), `--mode line names ${mode}`);
    const rendered = await run(['render', '--mode', mode, '--example']);
    assert.equal(rendered.code, 0, `${mode}: ${rendered.stderr}`);
  }
  const runHelp = await run(['run', '--help']);
  for (const mode of PROXY_MODES)
    assert.match(runHelp.stdout, new RegExp(`Modes that can run here: .*${mode}`));
});

test('the example cluster file is a kubectl-style v1 List', async () => {
  const text = await readFile(new URL('../../examples/cluster.yaml', import.meta.url), 'utf8');
  assert.match(text, /^apiVersion: v1$/m);
  assert.match(text, /^kind: List$/m);
});

test('the bundled example is clean: --strict passes in both modes', async () => {
  for (const mode of ['nftables', 'iptables']) {
    const result = await run(['render', '--mode', mode, '--example', '--strict']);
    assert.equal(result.stderr, '', mode);
    assert.equal(result.code, 0, mode);
  }
});

test('rendering for a node that is not in the input, without --node-ip, warns', async () => {
  const path = await write('no-node.json', list(service('web', '10.96.0.20'), slice('web', ['10.244.1.5'])));
  const result = await run(['render', '--mode', 'iptables', '--input', path, '--node', 'ghost']);
  assert.equal(result.code, 0);
  assert.match(result.stderr, /^warning: no Node "ghost" in the input and no --node-ip/m);
});
