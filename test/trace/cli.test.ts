// `kproxy trace` on the command line: what it prints for people, its JSON, and its usage errors.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { captureIO } from '../cli/capture-io.ts';
import { runTrace } from './cli-run.ts';

describe('kproxy trace', () => {
  test('prints the outcome, what the endpoint sees and the path for a person', async () => {
    const result = await runTrace([
      '--mode',
      'nftables',
      '--example',
      '--from',
      '10.244.1.13',
      '--to',
      '10.96.10.10:80',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^tcp 10\.244\.1\.13:40000 -> 10\.96\.10\.10:80, from outside the node \(nftables\)$/m,
    );
    assert.match(result.stdout, /^service: default\/web:80\/TCP$/m);
    assert.match(result.stdout, /^ {3}33\.3% {2}DNAT to 10\.244\.1\.13:8080$/m);
    assert.match(result.stdout, /endpoint sees node address \(masquerade\) -> 10\.244\.1\.13:8080/);
    assert.match(
      result.stdout,
      /masquerade: nat-postrouting: ct status dnat ip saddr \. ip daddr @hairpin masquerade/,
    );
    assert.match(
      result.stdout,
      /@service-ips 10\.96\.10\.10 \. tcp \. 80 : goto cluster-ip {2}\(default\/web:80\/TCP\)/,
    );
    assert.match(
      result.stdout,
      /endpoint sees 10\.244\.1\.13 -> 10\.244\.2\.14:8080\n {10}masquerade: no \(source kept\)/,
    );
  });

  test('--json gives the packet, the summed outcomes and each path', async () => {
    const result = await runTrace([
      '--mode',
      'iptables',
      '--example',
      '--json',
      '--from',
      '10.244.1.5:1234',
      '--to',
      '10.96.0.10:53/udp',
      '--via',
      'pod',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout);
    assert.deepEqual(Object.keys(report), [
      'mode',
      'packet',
      'service',
      'outcomes',
      'branches',
      'notEvaluated',
    ]);
    assert.deepEqual(report.packet, {
      source: '10.244.1.5',
      sourcePort: 1234,
      destination: '10.96.0.10',
      port: 53,
      protocol: 'udp',
      via: 'pod',
    });
    assert.equal(report.service, 'kube-system/kube-dns:53/UDP');
    // In the rules' order, which for iptables is the endpoint chains' (hashed names): not a contract.
    assert.deepEqual(
      report.outcomes
        .map((o: { endpoint: string; probability: number }) => [o.endpoint, o.probability])
        .sort(),
      [
        ['10.244.1.11:53', 0.5],
        ['10.244.2.12:53', 0.5],
      ],
    );
  });

  test('the node itself is the default source side for its own address', async () => {
    const result = await runTrace([
      '--mode',
      'nftables',
      '--example',
      '--json',
      '--from',
      '192.168.10.11',
      '--to',
      '10.96.10.10:80',
    ]);
    assert.equal(JSON.parse(result.stdout).packet.via, 'node');
  });

  const usage: readonly [string, readonly string[], RegExp][] = [
    ['no rules', ['--from', '10.0.0.1', '--to', '10.0.0.2:80'], /either --live, or --input/],
    [
      'both rule sources',
      ['--live', '--example', '--from', '10.0.0.1', '--to', '10.0.0.2:80'],
      /either --live/,
    ],
    ['no port', ['--example', '--from', '10.0.0.1', '--to', '10.0.0.2'], /--to: "10\.0\.0\.2" has no port/],
    ['bad protocol', ['--example', '--from', '10.0.0.1', '--to', '10.0.0.2:80/icmp'], /not tcp, udp or sctp/],
    ['families differ', ['--example', '--from', 'fd00::1', '--to', '10.0.0.2:80'], /different IP families/],
    ['bad via', ['--example', '--from', '10.0.0.1', '--to', '10.0.0.2:80', '--via', 'moon'], /--via: "moon"/],
    [
      'bad mode',
      ['--mode', 'ebpf', '--example', '--from', '10.0.0.1', '--to', '10.0.0.2:80'],
      /--mode: "ebpf"/,
    ],
  ];
  for (const [name, args, message] of usage) {
    test(`usage error: ${name}`, async () => {
      const result = await runTrace(args);
      assert.equal(result.code, 2);
      assert.match(result.stderr, message);
    });
  }

  test('is a kproxy command with its own help', async () => {
    const captured = captureIO();
    assert.equal(await main(['trace', '--help'], captured.io), 0);
    assert.match(captured.stdout(), /^Usage: kproxy trace --mode/);
  });
});
