// `kproxy diff --mode ipvs` against a kernel with ip_vs (issue 32). Runs INSIDE the throwaway qemu
// VM (test/in-vm.test.ts): each case loads the example's render (`render --script`) into a lab
// namespace of its own (IPVS is per namespace), tampers with it as an operator or another tool
// would, and reads the report of the real CLI, run in this process with its tools in that namespace.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type CommandRunner, execaRunner } from '../../../../dataplanes/shared/command-runner.ts';
import type { DriftReport } from '../../../../dataplanes/shared/drift/drift-report.ts';
import { Lab } from '../../../../harness/netns.ts';
import { diffCommand } from '../../../../src/cli/diff.ts';
import { renderCommand } from '../../../../src/cli/render.ts';
import { captureIO } from '../../../cli/capture-io.ts';

describe('kproxy diff (ipvs) on a kernel with ip_vs', () => {
  let lab: Lab;
  let runner: CommandRunner;
  let script: string;

  async function sh(command: string): Promise<void> {
    const result = await runner.run('sh', ['-ec', command]);
    assert.equal(result.exitCode, 0, `${command}: ${result.stderr}`);
  }

  async function diff(): Promise<{ code: number; report: DriftReport }> {
    const captured = captureIO();
    const code = await diffCommand(['--example', '--mode', 'ipvs', '--json'], captured.io, { runner });
    assert.notEqual(code, 2, captured.stderr());
    return { code, report: JSON.parse(captured.stdout()) };
  }

  const summary = (report: DriftReport) => report.pieces.map((p) => [p.kind, p.service, p.where, p.text]);

  before(async () => {
    lab = new Lab('diff-ipvs');
    const captured = captureIO();
    assert.equal(await renderCommand(['--example', '--mode', 'ipvs', '--script'], captured.io), 0);
    script = captured.stdout();
  });
  after(() => lab?.destroy());

  // A namespace per case: the render adds the link and the virtual servers, a second load fails.
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

  test('a changed weight: different, with the weight kproxy would give', async () => {
    await sh('ipvsadm -e -t 10.96.0.10:53 -r 10.244.2.12:53 -m -w 5');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(report.pieces, [
      {
        kind: 'different',
        service: 'kube-system/kube-dns:53/TCP',
        where: 'ipvs virtual server TCP 10.96.0.10:53',
        text: '-a -t 10.96.0.10:53 -r 10.244.2.12:53 -m -w 5',
        expected: '-a -t 10.96.0.10:53 -r 10.244.2.12:53 -m -w 1',
      },
    ]);
  });

  test('a deleted real server: missing, for its Service port', async () => {
    await sh('ipvsadm -d -t 10.96.10.10:80 -r 10.244.2.14:8080');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(summary(report), [
      [
        'missing',
        'default/web:80/TCP',
        'ipvs virtual server TCP 10.96.10.10:80',
        '-a -t 10.96.10.10:80 -r 10.244.2.14:8080 -m -w 1',
      ],
    ]);
  });

  test('a deleted virtual server and a virtual server someone added', async () => {
    await sh('ipvsadm -D -u 10.96.0.10:53; ipvsadm -A -t 10.96.99.99:80 -s wlc');
    const { report } = await diff();
    assert.deepEqual(summary(report), [
      [
        'missing',
        'kube-system/kube-dns:53/UDP',
        'ipvs virtual server UDP 10.96.0.10:53',
        '-A -u 10.96.0.10:53 -s rr',
      ],
      ['extra', '(node-wide)', 'ipvs virtual server TCP 10.96.99.99:80', '-A -t 10.96.99.99:80 -s wlc'],
    ]);
  });

  test('an address taken off kproxy-ipvs0: missing, for the Service port it serves', async () => {
    await sh('ip address del 10.96.0.1/32 dev kproxy-ipvs0');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(summary(report), [
      ['missing', 'default/kubernetes:443/TCP', 'link kproxy-ipvs0', 'address 10.96.0.1'],
    ]);
  });

  test('a foreign DROP before IPVS is named with the Service it hits; a harmless rule is listed, not judged', async () => {
    await sh(`nft add table ip guard
      nft add chain ip guard pre '{ type filter hook prerouting priority raw ; }'
      nft add rule ip guard pre ip daddr 10.96.10.10 tcp dport 80 drop
      nft add rule ip guard pre tcp dport 22 accept`);
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
  });

  test("the iptables mode's chain and jump left behind (iptables-nft): extra, not foreign", async () => {
    await sh('iptables-nft -t nat -N KPROXY-SERVICES; iptables-nft -t nat -A PREROUTING -j KPROXY-SERVICES');
    const { code, report } = await diff();
    assert.equal(code, 1);
    assert.deepEqual(report.pieces.map((p) => [p.kind, p.where]).sort(), [
      ['extra', 'ip nat chain KPROXY-SERVICES'],
      ['extra', 'ip nat chain PREROUTING'],
    ]);
    assert.deepEqual(report.foreign, []);
  });

  test("a flushed companion chain and the nftables mode's table left behind", async () => {
    const chain = 'nat-prerouting';
    await sh(`nft flush chain ip kproxy-ipvs ${chain}; nft add table ip kproxy`);
    const { code, report } = await diff();
    assert.equal(code, 1);
    const flushed = report.pieces.filter((p) => p.where === `ip kproxy-ipvs chain ${chain}`);
    assert.ok(flushed.length > 0, JSON.stringify(report.pieces));
    for (const piece of flushed) assert.equal(piece.kind, 'missing');
    assert.deepEqual(
      report.pieces.filter((p) => !flushed.includes(p)).map((p) => [p.kind, p.where, p.text]),
      [['extra', 'ip kproxy', "table ip kproxy: the nftables mode's leftover"]],
    );
  });
});
