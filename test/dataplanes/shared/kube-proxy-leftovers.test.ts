import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { isKubeProxyChain, leftoverRestoreInput } from '../../../dataplanes/shared/kube-proxy-leftovers.ts';
import { cleanupCommand } from '../../../src/cli/cleanup.ts';
import { Lab, requireRoot } from '../../support/netns.ts';

/** What kube-proxy (iptables mode) and kubelet leave in nat, in iptables-save form. */
const NAT = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-BBBBBBBBBBBBBBBB - [0:0]
:KPROXY-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KPROXY-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -m tcp -j DNAT --to-destination 10.244.0.5:8080
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SVC-BBBBBBBBBBBBBBBB -j KUBE-SEP-AAAAAAAAAAAAAAAA
COMMIT
`;

describe('kube-proxy leftovers', () => {
  test('kube-proxy chains are recognised; kubelet and kproxy chains are not', () => {
    for (const chain of [
      'KUBE-SERVICES',
      'KUBE-SVC-ABC',
      'KUBE-SEP-ABC',
      'KUBE-PROXY-CANARY',
      'KUBE-NODE-PORT',
    ]) {
      assert.ok(isKubeProxyChain(chain), chain);
    }
    for (const chain of [
      'KUBE-FIREWALL',
      'KUBE-MARK-DROP',
      'KUBE-KUBELET-CANARY',
      'KPROXY-SERVICES',
      'PREROUTING',
    ]) {
      assert.ok(!isKubeProxyChain(chain), chain);
    }
  });

  test('the restore input removes the jumps into kube-proxy chains, then the chains, and nothing else', () => {
    assert.equal(
      leftoverRestoreInput('nat', NAT),
      [
        '*nat',
        ':KUBE-MARK-MASQ - [0:0]',
        ':KUBE-NODEPORTS - [0:0]',
        ':KUBE-POSTROUTING - [0:0]',
        ':KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]',
        ':KUBE-SERVICES - [0:0]',
        ':KUBE-SVC-BBBBBBBBBBBBBBBB - [0:0]',
        '-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
        '-X KUBE-MARK-MASQ',
        '-X KUBE-NODEPORTS',
        '-X KUBE-POSTROUTING',
        '-X KUBE-SEP-AAAAAAAAAAAAAAAA',
        '-X KUBE-SERVICES',
        '-X KUBE-SVC-BBBBBBBBBBBBBBBB',
        'COMMIT',
        '',
      ].join('\n'),
    );
    assert.equal(leftoverRestoreInput('nat', '*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n'), '');
  });

  test('kproxy cleanup --kube-proxy on a real kernel: kube-proxy and kproxy rules go, kubelet’s stay', async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab(`leftover${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    await lab.exec(ns, 'iptables-nft-restore', [], { input: NAT });
    await lab.exec(ns, 'nft', ['-f', '-'], {
      input:
        'table ip kube-proxy {\n chain services {\n }\n}\ntable ip6 kube-proxy {\n}\ntable ip other {\n}\n',
    });

    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      stdin: (async function* () {})(),
    };
    const runner = execaRunner(['ip', 'netns', 'exec', ns]);
    assert.equal(await cleanupCommand(['--mode', 'iptables', '--kube-proxy'], io, runner), 0, stderr);
    assert.match(stdout, /removed kproxy's iptables rules/);
    assert.match(stdout, /removed nft table ip kube-proxy/);
    assert.match(stdout, /removed iptables-nft nat: 6 kube-proxy chain\(s\)/);

    const saved = (await lab.exec(ns, 'iptables-nft-save', ['-t', 'nat'])).stdout;
    assert.doesNotMatch(saved, /KUBE-(SERVICES|SVC|SEP|POSTROUTING|MARK-MASQ|NODEPORTS)/);
    assert.doesNotMatch(saved, /KPROXY-/);
    assert.match(saved, /:KUBE-KUBELET-CANARY/);
    const tables = (await lab.exec(ns, 'nft', ['list', 'tables'])).stdout;
    assert.doesNotMatch(tables, /kube-proxy/);
    assert.match(tables, /table ip other/);
  });
});
