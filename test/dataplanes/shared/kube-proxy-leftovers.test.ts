import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import type { CommandRunner } from '../../../dataplanes/shared/command-runner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import {
  isKubeProxyChain,
  isKubeProxyIpset,
  leftoverRestoreInputs,
  removeKubeProxyLeftovers,
} from '../../../dataplanes/shared/kube-proxy-leftovers.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { cleanupCommand } from '../../../src/cli/cleanup.ts';
import { FakeKernel } from '../ipvs/fake-kernel.ts';

/** What kube-proxy's IPVS mode leaves in nat (iptables-legacy here), its ipsets referred to. */
const IPVS_NAT = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODE-PORT - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-NODE-PORT
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
COMMIT
`;

/** A runner that finds nothing (no link, no ipset, no nft, no iptables): none of the tools is there. */
const emptyHost: CommandRunner = {
  run: async () => ({ stdout: '', stderr: 'not found', exitCode: 127 }),
};

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
    assert.deepEqual(leftoverRestoreInputs('nat', NAT, Number.POSITIVE_INFINITY), [
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
    ]);
    assert.deepEqual(leftoverRestoreInputs('nat', '*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n', 1), []);
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
    assert.match(stdout, /removed iptables-nft nat: 1 kproxy chain\(s\) \(kproxy iptables mode\)/);
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

  test('kube-proxy chains go in pieces on a real kernel: each piece restores, and the last leaves none', async (t) => {
    if (!requireRoot(t)) return;
    // Upstream's own rules (TestOverallIPTablesRules: 16 per-service chains in nat) and two of the
    // jumps kube-proxy adds from built-in chains; pieces of 2 per-service chains make 10 inputs.
    const upstream = await readFile(
      new URL('fixtures/kube-proxy/iptables-overall.restore', import.meta.url),
      'utf8',
    );
    const lab = new Lab(`kpieces${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // Its rules count in kube-proxy's nfacct objects, which kube-proxy makes at start.
    for (const name of ['ct_state_invalid_dropped_pkts', 'localhost_nps_accepted_pkts'])
      await lab.exec(ns, 'nfacct', ['add', name]);
    await lab.exec(ns, 'iptables-nft-restore', [], { input: upstream });
    for (const chain of ['PREROUTING', 'OUTPUT'])
      await lab.exec(ns, 'iptables-nft', ['-t', 'nat', '-I', chain, '-j', 'KUBE-SERVICES']);
    await lab.exec(ns, 'iptables-nft', ['-t', 'nat', '-N', 'SITE-NAT']);
    await lab.exec(ns, 'iptables-nft', ['-t', 'nat', '-A', 'OUTPUT', '-j', 'SITE-NAT']);
    const saved = async () => (await lab.exec(ns, 'iptables-nft-save', ['-t', 'nat'])).stdout;

    const pieces = leftoverRestoreInputs('nat', await saved(), 2);
    assert.equal(pieces.length, 10);
    const declared = (piece: string) => piece.split('\n').filter((line) => line.startsWith(':')).length;
    for (const piece of pieces.slice(1, -1)) assert.ok(declared(piece) <= 2, piece);
    // The kernel refuses to delete a chain a rule still jumps to: each piece must leave every reference valid.
    for (const piece of pieces) {
      const restored = await execaRunner(['ip', 'netns', 'exec', ns]).run(
        'iptables-nft-restore',
        ['--noflush'],
        piece,
      );
      assert.equal(restored.exitCode, 0, `${piece}\n${restored.stderr}`);
    }
    const after = await saved();
    assert.doesNotMatch(after, /KUBE-/);
    assert.match(after, /-A OUTPUT -j SITE-NAT/);
  });

  test("filter's KUBE-FIREWALL goes with its comment-less jumps when it holds only kube-proxy's localnet drop", () => {
    const filter = (firewallRule: string) =>
      [
        '*filter',
        ':INPUT ACCEPT [0:0]',
        ':OUTPUT ACCEPT [0:0]',
        ':KUBE-FIREWALL - [0:0]',
        '-A INPUT -j KUBE-FIREWALL',
        '-A OUTPUT -j KUBE-FIREWALL',
        firewallRule,
        'COMMIT',
        '',
      ].join('\n');
    // kube-proxy 1.28+ (upstream's TestOverallIPTablesRules, fixtures/kube-proxy).
    const kubeProxys =
      '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP';
    assert.deepEqual(leftoverRestoreInputs('filter', filter(kubeProxys), Number.POSITIVE_INFINITY), [
      [
        '*filter',
        ':KUBE-FIREWALL - [0:0]',
        '-D INPUT -j KUBE-FIREWALL',
        '-D OUTPUT -j KUBE-FIREWALL',
        '-X KUBE-FIREWALL',
        'COMMIT',
        '',
      ].join('\n'),
    ]);
    // kubelet before 1.28 filled it with its mark-drop rule: kubelet's, it stays.
    const kubelets =
      '-A KUBE-FIREWALL -m comment --comment "kubernetes firewall for dropping marked packets" -m mark --mark 0x8000/0x8000 -j DROP';
    assert.deepEqual(leftoverRestoreInputs('filter', filter(kubelets), 1), []);
    assert.deepEqual(leftoverRestoreInputs('nat', filter(kubeProxys).replace('*filter', '*nat'), 1), []);
  });

  test('kube-proxy IPVS ipsets are recognised in both families; other KUBE-* sets are not', () => {
    for (const name of [
      'KUBE-CLUSTER-IP',
      'KUBE-6-CLUSTER-IP',
      'KUBE-NODE-PORT-LOCAL-SCTP-HASH',
      'KUBE-IPVS-IPS',
    ]) {
      assert.ok(isKubeProxyIpset(name), name);
    }
    // kube-router's policy sets and anyone else's keep theirs.
    for (const name of ['KUBE-DST-ABCDEF', 'KUBE-SRC-ABCDEF', 'KPROXY-CLUSTER-IP', 'cali40all-ipam-pools']) {
      assert.ok(!isKubeProxyIpset(name), name);
    }
  });

  test('with ip_vs loaded, every IPVS virtual service goes (kube-proxy flushes IPVS), and the table is closed', async () => {
    const kernel = new FakeKernel();
    const client = kernel.client();
    const service = (address: string, port: number) => ({
      family: 'IPv4' as const,
      protocol: 'TCP' as const,
      address,
      port,
      scheduler: 'rr',
      persistenceTimeout: 0,
      schedulerFlags: [],
    });
    await client.addService(service('10.96.0.10', 53));
    await client.addService(service('192.168.1.5', 30080));
    let closed = false;
    const removed = await removeKubeProxyLeftovers(emptyHost, {
      openIpvs: async () => ({ ...client, close: () => (closed = true) }),
    });
    assert.deepEqual(removed, ['IPVS: 2 virtual service(s)']);
    assert.deepEqual(kernel.ipvs(), []);
    assert.ok(closed);
    // Without ip_vs there is no table to open, and nothing else was found.
    assert.deepEqual(await removeKubeProxyLeftovers(emptyHost, { openIpvs: async () => undefined }), []);
  });

  test('kproxy cleanup --kube-proxy on a real kernel: IPVS mode leftovers (kube-ipvs0, ipsets, iptables-legacy) go, others stay', async (t) => {
    if (!requireRoot(t)) return;
    const lab = new Lab(`leftipvs${process.pid % 1000}`);
    t.after(() => lab.destroy());
    const ns = await lab.addNetns('node');
    // No dummy module here: a bridge stands in for kube-proxy's dummy kube-ipvs0 (deleted by name).
    await lab.exec(ns, 'ip', ['link', 'add', 'kube-ipvs0', 'type', 'bridge']);
    await lab.exec(ns, 'ip', ['addr', 'add', '10.96.0.10/32', 'dev', 'kube-ipvs0']);
    await lab.exec(ns, 'ipset', ['restore'], {
      input: [
        'create KUBE-CLUSTER-IP hash:ip,port family inet',
        'add KUBE-CLUSTER-IP 10.96.0.10,tcp:53',
        'create KUBE-6-CLUSTER-IP hash:ip,port family inet6',
        'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535',
        'create KUBE-DST-KUBEROUTER hash:ip family inet',
        '',
      ].join('\n'),
    });
    await lab.exec(ns, 'iptables-legacy-restore', [], { input: IPVS_NAT });
    await lab.exec(ns, 'iptables-nft-restore', [], { input: NAT });

    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      stdin: (async function* () {})(),
    };
    const runner = execaRunner(['ip', 'netns', 'exec', ns]);
    assert.equal(await cleanupCommand(['--mode', 'iptables', '--kube-proxy'], io, runner), 0, stderr);
    assert.match(stdout, /removed link kube-ipvs0/);
    assert.match(stdout, /removed iptables-legacy nat: 3 kube-proxy chain\(s\)/);
    assert.match(stdout, /removed iptables-nft nat: 6 kube-proxy chain\(s\)/);
    assert.match(stdout, /removed ipset: KUBE-CLUSTER-IP, KUBE-6-CLUSTER-IP, KUBE-NODE-PORT-TCP/);

    const links = (await lab.exec(ns, 'ip', ['-o', 'link', 'show'])).stdout;
    assert.doesNotMatch(links, /kube-ipvs0/);
    const sets = (await lab.exec(ns, 'ipset', ['list', '-n'])).stdout.trim().split('\n');
    assert.deepEqual(sets, ['KUBE-DST-KUBEROUTER']);
    for (const tool of ['iptables-legacy-save', 'iptables-nft-save']) {
      const saved = (await lab.exec(ns, tool, ['-t', 'nat'])).stdout;
      assert.doesNotMatch(saved, /KUBE-(SERVICES|NODE-PORT|MARK-MASQ|SVC|SEP)/, tool);
    }
  });
});
