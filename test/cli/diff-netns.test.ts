// `kproxy diff` (nftables and iptables modes) against a real kernel: the example's render loaded
// into a network namespace, then tampered with as an operator or another tool would; each change
// is reported as the piece it is, with the Service port it belongs to, and a node in sync reports
// equal (exit 0).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { parse } from 'yaml';
import { MAGLEV_SLOTS } from '../../dataplanes/nftables/maglev.ts';
import { type CommandRunner, execaRunner } from '../../dataplanes/shared/command-runner.ts';
import type { DriftReport } from '../../dataplanes/shared/drift/drift-report.ts';
import { parseNftRuleset } from '../../dataplanes/shared/trace/nft-ruleset.ts';
import { standInKubeconfig } from '../../harness/apiserver/kubeconfig.ts';
import { sampleService } from '../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../harness/apiserver/server.ts';
import { Lab } from '../../harness/netns.ts';
import { diffCommand } from '../../src/cli/diff.ts';
import { renderCommand } from '../../src/cli/render.ts';
import { traceCommand } from '../../src/cli/trace.ts';
import { RESOURCE_TYPES, SERVICES } from '../../src/kube/resources.ts';
import { EXAMPLE_CLUSTER_PATH, EXAMPLE_CONFIG_PATH } from '../../src/sources/example-cluster.ts';
import { freePort } from '../support/free-port.ts';
import { captureIO } from './capture-io.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces and nft (run the suite as root)';
if (!isRoot) process.stderr.write(`SKIPPED kproxy diff kernel tests: ${ROOT_REASON}\n`);

describe('kproxy diff (nftables) on a real kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let runner: CommandRunner;
  let script: string;

  /** Replaces elements of kproxy's backends-tcp map: `keys` deleted, then `elements` added. */
  async function rewriteBackends(keys: string, elements: string): Promise<void> {
    await nft('delete', 'element', 'ip', 'kproxy', 'backends-tcp', `{ ${keys} }`);
    await nft('add', 'element', 'ip', 'kproxy', 'backends-tcp', `{ ${elements} }`);
  }

  /** web's first endpoint slot sent to an address no endpoint has (10.244.9.9). */
  function pointWebAtGoneEndpoint(): Promise<void> {
    return rewriteBackends('10.96.10.10 . 80 . 0', '10.96.10.10 . 80 . 0 : 10.244.9.9 . 8080');
  }

  async function nft(...args: string[]): Promise<void> {
    const result = await runner.run('nft', args);
    assert.equal(result.exitCode, 0, `nft ${args.join(' ')}: ${result.stderr}`);
  }

  async function diff(json = true): Promise<{ code: number; report: DriftReport; text: string }> {
    const captured = captureIO();
    const code = await diffCommand(['--example', ...(json ? ['--json'] : [])], captured.io, { runner });
    assert.notEqual(code, 2, captured.stderr());
    return { code, report: json ? JSON.parse(captured.stdout()) : undefined!, text: captured.stdout() };
  }

  before(async () => {
    lab = new Lab('diff');
    const ns = await lab.addNetns('node');
    runner = execaRunner(['ip', 'netns', 'exec', ns]);
    const captured = captureIO();
    assert.equal(await renderCommand(['--example', '--mode', 'nftables'], captured.io), 0);
    script = captured.stdout();
  });
  after(() => lab?.destroy());

  // The render replaces the table whole (add, delete, add): every case starts from a node in sync.
  beforeEach(async () => {
    const loaded = await runner.run('nft', ['-f', '-'], script);
    assert.equal(loaded.exitCode, 0, loaded.stderr);
  });

  test('a node in sync reports equal, exit 0', async () => {
    const { code, text } = await diff(false);
    assert.equal(code, 0);
    assert.match(text, /the kernel holds what kproxy would install/);
  });

  test('a flushed chain: each of its rules missing, node-wide', async () => {
    await nft('flush', 'chain', 'ip', 'kproxy', 'cluster-ips-check');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(
      report.pieces.map((p) => [p.kind, p.where, p.service, p.text]),
      [
        ['missing', 'ip kproxy chain cluster-ips-check', '(node-wide)', 'ip daddr @cluster-ips reject'],
        ['missing', 'ip kproxy chain cluster-ips-check', '(node-wide)', 'ip daddr 10.96.0.0/12 drop'],
      ],
    );
  });

  test('a deleted map element: missing, for its Service port (the protocol from the map)', async () => {
    await nft('delete', 'element', 'ip', 'kproxy', 'backends-tcp', '{ 10.96.0.10 . 53 . 1 }');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(report.pieces, [
      {
        kind: 'missing',
        service: 'kube-system/kube-dns:53/TCP',
        where: 'ip kproxy map backends-tcp',
        text: '10.96.0.10 . 53 . 1 : 10.244.2.12 . 53',
      },
    ]);
  });

  // The daemon's incremental syncs keep each endpoint at its slot (endpoint-slots.ts): the same
  // endpoints at other indexes are what kproxy holds, not drift.
  test('endpoints at other indexes of their key than the render gives them: equal', async () => {
    await rewriteBackends(
      '10.96.0.10 . 53 . 0, 10.96.0.10 . 53 . 1',
      '10.96.0.10 . 53 . 0 : 10.244.2.12 . 53, 10.96.0.10 . 53 . 1 : 10.244.1.11 . 53',
    );
    const { code, report } = await diff();
    assert.equal(code, 0, JSON.stringify(report.pieces));
  });

  // A Maglev table (ipvs.scheduler mh) is a function of its key's endpoints that every sync keeps
  // slot for slot (maglev.ts): two slots swapped send their clients to each other's endpoint.
  test('Maglev slots (--ipvs-scheduler mh): in sync is equal, two slots swapped are different', async () => {
    const mh = ['--example', '--mode', 'nftables', '--ipvs-scheduler', 'mh'];
    const rendered = captureIO();
    assert.equal(await renderCommand(mh, rendered.io), 0);
    const loaded = await runner.run('nft', ['-f', '-'], rendered.stdout());
    assert.equal(loaded.exitCode, 0, loaded.stderr);
    const diffMh = async () => {
      const captured = captureIO();
      const code = await diffCommand([...mh, '--json'], captured.io, { runner });
      assert.notEqual(code, 2, captured.stderr());
      return { code, report: JSON.parse(captured.stdout()) as DriftReport };
    };
    assert.deepEqual((await diffMh()).report.pieces, []);

    const listed = await runner.run('nft', ['list', 'map', 'ip', 'kproxy', 'backends-tcp']);
    const elements = parseNftRuleset(listed.stdout)
      .tables.get('ip kproxy')
      ?.sets.get('backends-tcp')?.elements;
    const web = (elements ?? []).filter((e) => e.key.slice(0, 2).join(' . ') === '10.96.10.10 . 80');
    assert.equal(web.length, MAGLEV_SLOTS, listed.stdout);
    const a = web[0]!;
    const b = web.find((e) => e.value?.join(' . ') !== a.value?.join(' . '))!;
    const text = (key: readonly string[], value: readonly string[] | undefined) =>
      `${key.join(' . ')} : ${value?.join(' . ')}`;
    await rewriteBackends(
      `${a.key.join(' . ')}, ${b.key.join(' . ')}`,
      `${text(a.key, b.value)}, ${text(b.key, a.value)}`,
    );
    const { code, report } = await diffMh();
    assert.equal(code, 1);
    const where = 'ip kproxy map backends-tcp';
    const service = 'default/web:80/TCP';
    assert.deepEqual(report.pieces, [
      { kind: 'different', service, where, text: text(a.key, b.value), expected: text(a.key, a.value) },
      { kind: 'different', service, where, text: text(b.key, a.value), expected: text(b.key, b.value) },
    ]);
  });

  test('an element sending to an endpoint that is gone: different, with what kproxy would hold', async () => {
    await pointWebAtGoneEndpoint();
    const { report } = await diff();
    assert.deepEqual(report.pieces, [
      {
        kind: 'different',
        service: 'default/web:80/TCP',
        where: 'ip kproxy map backends-tcp',
        text: '10.96.10.10 . 80 . 0 : 10.244.9.9 . 8080',
        expected: '10.96.10.10 . 80 . 0 : 10.244.1.13 . 8080',
      },
    ]);
  });

  test('a rule someone added inside our chain: extra', async () => {
    await nft('insert', 'rule', 'ip', 'kproxy', 'services', 'ip', 'daddr', '10.96.0.99', 'accept');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(
      report.pieces.map((p) => [p.kind, p.where, p.text]),
      [['extra', 'ip kproxy chain services', 'ip daddr 10.96.0.99 accept']],
    );
  });

  test('a foreign DROP before ours is named with the Service it hits; a harmless rule is listed, not judged', async () => {
    await nft('add', 'table', 'ip', 'guard');
    try {
      await nft('add', 'chain', 'ip', 'guard', 'pre', '{ type filter hook prerouting priority raw ; }');
      await nft(
        'add',
        'rule',
        'ip',
        'guard',
        'pre',
        'ip',
        'daddr',
        '10.96.10.10',
        'tcp',
        'dport',
        '80',
        'drop',
      );
      await nft('add', 'rule', 'ip', 'guard', 'pre', 'tcp', 'dport', '22', 'accept');
      const { code, report } = await diff();
      assert.equal(code, 1, 'a foreign rule dropping a Service is drift');
      assert.deepEqual(report.pieces, []);
      assert.deepEqual(report.foreign, [
        {
          where: 'ip guard chain pre (prerouting)',
          text: 'ip daddr 10.96.10.10 tcp dport 80 drop',
          hits: ['default/web:80/TCP'],
        },
        { where: 'ip guard chain pre (prerouting)', text: 'tcp dport 22 accept', hits: [] },
      ]);
      await nft('delete', 'rule', 'ip', 'guard', 'pre', 'handle', await handleOf('guard', 'pre', 'drop'));
      assert.equal((await diff()).code, 0, 'a foreign rule that hits no Service is not drift');
    } finally {
      await runner.run('nft', ['delete', 'table', 'ip', 'guard']);
    }
  });

  test("another mode's leftovers: the iptables mode's chains and jump, the ipvs mode's table", async () => {
    const iptables = (...args: string[]) => runner.run('iptables-nft', ['-t', 'nat', ...args]);
    try {
      assert.equal((await iptables('-N', 'KPROXY-SERVICES')).exitCode, 0);
      assert.equal((await iptables('-A', 'PREROUTING', '-j', 'KPROXY-SERVICES')).exitCode, 0);
      await nft('add', 'table', 'ip', 'kproxy-ipvs');
      const { code, report } = await diff();
      assert.equal(code, 1);
      assert.deepEqual(
        report.pieces.map((p) => [p.kind, p.where]).sort(),
        [
          ['extra', 'ip nat chain PREROUTING'],
          ['extra', 'ip nat chain KPROXY-SERVICES'],
          ['extra', 'ip kproxy-ipvs'],
        ].sort(),
      );
      assert.deepEqual(report.foreign, [], "leftovers are kproxy's, not foreign");
    } finally {
      await runner.run('nft', ['delete', 'table', 'ip', 'nat']);
      await runner.run('nft', ['delete', 'table', 'ip', 'kproxy-ipvs']);
    }
  });

  test("the README's example output is what diff prints for its tampering", async () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const shown = readme.match(/\$ kproxy diff --mode nftables --example\n([\s\S]*?)\$ echo \$\?\n1\n/)![1];
    await pointWebAtGoneEndpoint();
    await nft('flush', 'chain', 'ip', 'kproxy', 'cluster-ips-check');
    await nft('add', 'table', 'ip', 'guard');
    try {
      await nft('add', 'chain', 'ip', 'guard', 'pre', '{ type filter hook prerouting priority raw ; }');
      await nft('add', 'rule', 'ip', 'guard', 'pre', 'ip daddr 10.96.0.10 udp dport 53 drop');
      const { code, text } = await diff(false);
      assert.equal(code, 1);
      assert.equal(text, shown);
    } finally {
      await runner.run('nft', ['delete', 'table', 'ip', 'guard']);
    }
  });

  // nft 1.0.6 cannot list a table a newer nft wrote with expressions it does not know
  // (kubernetes#136786); this nft cannot write one, so the real runner is wrapped to refuse the
  // listing of one real table as that nft does, and only that.
  test('a table nft cannot list is named as not read and stops neither diff nor trace --live', async () => {
    await nft('add', 'table', 'ip', 'newer');
    try {
      const refusing: CommandRunner = {
        run: (command, args, input) =>
          command === 'nft' && args.join(' ') === 'list table ip newer'
            ? Promise.resolve({ stdout: '', stderr: 'Error: unknown expression type', exitCode: 1 })
            : runner.run(command, args, input),
      };
      const captured = captureIO();
      assert.equal(await diffCommand(['--example', '--json'], captured.io, { runner: refusing }), 0);
      const report: DriftReport = JSON.parse(captured.stdout());
      assert.deepEqual(report.unreadable, ['table ip newer: Error: unknown expression type']);
      const traced = captureIO();
      const args = ['--live', '--from', '192.0.2.1', '--to', '10.96.10.10:80', '--local', '192.0.2.2'];
      assert.equal(await traceCommand(args, traced.io, { runner: refusing }), 0);
      assert.match(traced.stderr(), /warning: not read: table ip newer: Error: unknown expression type/);
      assert.match(traced.stdout(), /DNAT to 10\.244\./);
    } finally {
      await runner.run('nft', ['delete', 'table', 'ip', 'newer']);
    }
  });

  test('a missing table: everything of it missing in one piece', async () => {
    await nft('delete', 'table', 'ip6', 'kproxy');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(report.pieces, [
      { kind: 'missing', service: '(node-wide)', where: 'ip6 kproxy', text: 'table ip6 kproxy' },
    ]);
  });

  /** The handle of the rule of `chain` whose text ends in `verdict`. */
  async function handleOf(table: string, chain: string, verdict: string): Promise<string> {
    const listed = await runner.run('nft', ['-a', 'list', 'chain', 'ip', table, chain]);
    return listed.stdout.match(new RegExp(`${verdict} # handle (\\d+)`))![1]!;
  }
});

describe('kproxy diff (iptables) on a real kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let runner: CommandRunner;
  let script: string;

  async function iptables(...args: string[]): Promise<void> {
    const result = await runner.run('iptables', args);
    assert.equal(result.exitCode, 0, `iptables ${args.join(' ')}: ${result.stderr}`);
  }

  async function diff(): Promise<{ code: number; report: DriftReport }> {
    const captured = captureIO();
    const code = await diffCommand(['--example', '--mode', 'iptables', '--json'], captured.io, { runner });
    assert.notEqual(code, 2, captured.stderr());
    return { code, report: JSON.parse(captured.stdout()) };
  }

  /** The nat chain whose rules carry `comment` (a Service port's KPROXY-SVC- chain). */
  async function chainOf(comment: string): Promise<string> {
    const saved = await runner.run('iptables-save', ['-t', 'nat']);
    return saved.stdout.match(new RegExp(`-A (KPROXY-SVC-\\S+) .*--comment "${comment}`))![1]!;
  }

  before(async () => {
    lab = new Lab('diff-ipt');
    const captured = captureIO();
    assert.equal(await renderCommand(['--example', '--mode', 'iptables', '--script'], captured.io), 0);
    script = captured.stdout();
  });
  after(() => lab?.destroy());

  // A namespace per case (a second load would append the built-in chains' jumps again): each
  // case starts from a node in sync.
  let cases = 0;
  beforeEach(async () => {
    runner = execaRunner(['ip', 'netns', 'exec', await lab.addNetns(`node-${cases++}`)]);
    const loaded = await runner.run('sh', [], script);
    assert.equal(loaded.exitCode, 0, loaded.stderr);
  });

  test('a node in sync reports equal, exit 0', async () => {
    const { code, report } = await diff();
    assert.equal(code, 0, JSON.stringify(report.pieces));
  });

  test('a flushed Service chain: its rules missing, each for its Service port', async () => {
    await iptables('-t', 'nat', '-F', await chainOf('default/web:80/TCP'));
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.ok(report.pieces.length >= 2);
    for (const piece of report.pieces) {
      assert.equal(piece.kind, 'missing');
      assert.equal(piece.service, 'default/web:80/TCP');
    }
  });

  test('a rule added inside our chain: extra', async () => {
    const chain = await chainOf('default/web:80/TCP');
    await iptables('-t', 'nat', '-I', chain, '-s', '10.9.9.9/32', '-j', 'RETURN');
    const { report } = await diff();
    assert.deepEqual(
      report.pieces.map((p) => [p.kind, p.where, p.text]),
      [['extra', `IPv4 nat chain ${chain}`, `-A ${chain} -s 10.9.9.9/32 -j RETURN`]],
    );
  });

  test('a foreign DROP before ours is named with the Service it hits', async () => {
    const rule = [
      'PREROUTING',
      '-d',
      '10.96.10.10/32',
      '-p',
      'tcp',
      '-m',
      'tcp',
      '--dport',
      '80',
      '-j',
      'DROP',
    ];
    await iptables('-t', 'mangle', '-I', ...rule);
    try {
      const { code, report } = await diff();
      assert.equal(code, 1);
      assert.deepEqual(report.pieces, []);
      assert.deepEqual(report.foreign, [
        { where: 'IPv4 mangle chain PREROUTING', text: `-A ${rule.join(' ')}`, hits: ['default/web:80/TCP'] },
      ]);
    } finally {
      await iptables('-t', 'mangle', '-D', ...rule);
    }
  });

  test("the nftables mode's table left behind: extra", async () => {
    await runner.run('nft', ['add', 'table', 'ip', 'kproxy']);
    try {
      const { code, report } = await diff();
      assert.equal(code, 1);
      assert.deepEqual(
        report.pieces.map((p) => [p.kind, p.where]),
        [['extra', 'ip kproxy']],
      );
    } finally {
      await runner.run('nft', ['delete', 'table', 'ip', 'kproxy']);
    }
  });
});

// --live-api: the objects listed from a cluster (the stand-in API server, on this process'
// loopback) as kproxy run lists them; the kernel is a namespace holding the example's render.
describe('kproxy diff --live-api on a real kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  let runner: CommandRunner;
  let api: StandInApiServer;
  /** The example's configuration, its kubeconfig the stand-in's. */
  let config: string;
  let dir: string;

  async function diff(...more: string[]): Promise<{ code: number; report: DriftReport; stderr: string }> {
    const captured = captureIO();
    const args = ['--live-api', '--config', config, '--json', ...more];
    const code = await diffCommand(['--hostname-override', 'node-1', ...args], captured.io, { runner });
    assert.notEqual(code, 2, captured.stderr());
    return { code, report: JSON.parse(captured.stdout()), stderr: captured.stderr() };
  }

  before(async () => {
    lab = new Lab('diff-api');
    runner = execaRunner(['ip', 'netns', 'exec', await lab.addNetns('node')]);
    const captured = captureIO();
    assert.equal(await renderCommand(['--example', '--mode', 'nftables'], captured.io), 0);
    const loaded = await runner.run('nft', ['-f', '-'], captured.stdout());
    assert.equal(loaded.exitCode, 0, loaded.stderr);
    api = await startApiServer({ port: await freePort() });
    const list = parse(readFileSync(EXAMPLE_CLUSTER_PATH, 'utf8')) as { items: { kind: string }[] };
    for (const item of list.items) api.state.apply(RESOURCE_TYPES.find((r) => r.kind === item.kind)!, item);
    dir = await mkdtemp(join(tmpdir(), 'kproxy-diff-'));
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, standInKubeconfig(api.url));
    config = join(dir, 'config.yaml');
    const example = readFileSync(EXAMPLE_CONFIG_PATH, 'utf8');
    await writeFile(
      config,
      example.replace('kubeconfig: /etc/kproxy/kubeconfig', `kubeconfig: ${kubeconfig}`),
    );
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
    await api?.stop();
    await lab?.destroy();
  });

  test("the cluster's objects, listed as the daemon lists them: equal to the example's render", async () => {
    const { code, report } = await diff();
    assert.equal(code, 0, JSON.stringify(report.pieces));
  });

  test('a Service created in the cluster and not in the kernel: its pieces missing, named for it', async () => {
    api.state.apply(SERVICES, sampleService('default', 'new', { clusterIP: '10.96.77.77' }));
    try {
      const { code, report } = await diff();
      assert.equal(code, 1);
      assert.ok(report.pieces.length > 0);
      for (const piece of report.pieces) {
        assert.equal(piece.kind, 'missing', JSON.stringify(piece));
        assert.match(piece.text, /10\.96\.77\.77/, JSON.stringify(piece));
      }
      // Pieces that name the port are the Service port's; its ClusterIP alone (cluster-ips) is not.
      assert.ok(report.pieces.some((piece) => piece.service === 'default/new:80/TCP'));
    } finally {
      api.state.delete(SERVICES, 'default', 'new');
    }
  });

  test('an API server that does not answer: exit 2 naming it, after the deadline', async () => {
    const captured = captureIO();
    const args = ['--live-api', '--master', 'http://127.0.0.1:1', '--hostname-override', 'node-1'];
    const code = await diffCommand(args, captured.io, { runner, liveApiDeadlineMs: 2_000 });
    assert.equal(code, 2);
    assert.match(
      captured.stderr(),
      /kproxy diff: http:\/\/127\.0\.0\.1:1: not every list answered within 2 s/,
    );
  });

  test('--live-api with --example is a usage error', async () => {
    const captured = captureIO();
    assert.equal(await diffCommand(['--live-api', '--example'], captured.io, { runner }), 2);
    assert.match(captured.stderr(), /--live-api reads the cluster: give no --input or --example/);
  });
});
