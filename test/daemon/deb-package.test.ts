// The .deb as a node gets it: `npm run package` builds it, apt installs it into a fresh Debian root
// (mmdebstrap) booted under systemd (systemd-nspawn, in a lab node's network namespace), and there,
// as an operator: install (the kproxy user, the unit not enabled, `kproxy --version`), enable
// against the stand-in API server until rules are synced, upgrade to a newer build (the config as
// the operator left it, kproxy restarted), remove (stopped, the rules left as a stop leaves them,
// the config kept), purge (the config and kproxy's rules gone, in nftables and in both iptables
// backends, where a run in iptables mode left some; other owners' rules kept). The node's kernel
// has no IPVS here: the purge's IPVS removals are test/cli/cleanup-script.test.ts's and the
// dataplane's. And lintian, where Debian has it.
// Slow: the package build (tsc, ~140 MiB gzipped) and the root (minutes, debian-machine.ts): it
// runs in the test script's second lane. Skipped LOUDLY without root, mmdebstrap or systemd-nspawn.
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { IptablesDataplane } from '../../dataplanes/iptables/live.ts';
import { execaRunner } from '../../dataplanes/shared/command-runner.ts';
import { standInKubeconfig } from '../../harness/apiserver/kubeconfig.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../harness/proxy-states.ts';
import { Topology } from '../../harness/topology.ts';
import { CONFIG_PATH, SERVICE_USER } from '../../src/cli/install.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import {
  boot,
  buildPackage,
  type Machine,
  makeDebianRoot,
  missingTools,
  standInApiServer,
} from './debian-machine.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CLUSTER_IP = '10.96.0.10';
const VERSION = (JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string })
  .version;
/** The "newer build" of the upgrade: the same tree repacked under a higher Debian version. */
const NEWER_VERSION = `${VERSION}+1`;

const OPERATOR_CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-0
clusterCIDR: 10.244.0.0/16
syncPeriod: 1s
minSyncPeriod: 100ms
clientConnection:
  kubeconfig: /etc/kproxy/kubeconfig
`;

/** `npm run package` once for both tests, into a directory removed after them. */
const packageDir = await mkdtemp(join(tmpdir(), 'kproxy-package-'));
let built: Promise<string> | undefined;
function builtPackage(): Promise<string> {
  built ??= buildPackage(packageDir, 'deb-package');
  return built;
}

/** The same package under NEWER_VERSION (dpkg-deb -R unpacks the tree with its DEBIAN/). */
async function repackNewer(deb: string, dir: string): Promise<string> {
  const tree = join(dir, 'newer');
  await execa('dpkg-deb', ['-R', deb, tree]);
  const control = join(tree, 'DEBIAN/control');
  await writeFile(
    control,
    (await readFile(control, 'utf8')).replace(/^Version: .*$/m, `Version: ${NEWER_VERSION}`),
  );
  const newer = join(dir, `kproxy_${NEWER_VERSION}_amd64.deb`);
  await execa('dpkg-deb', ['--root-owner-group', '-Znone', '--build', tree, newer]);
  return newer;
}

async function apt(machine: Machine, ...args: string[]): Promise<string> {
  return (await machine.run('env', ['DEBIAN_FRONTEND=noninteractive', 'apt-get', '-y', '-q', ...args]))
    .stdout;
}

describe('the kproxy .deb', { concurrency: true }, () => {
  after(() => rm(packageDir, { recursive: true, force: true }));

  test('lintian finds no error in it', { timeout: 20 * 60_000 }, async (t) => {
    if ((await execa('sh', ['-c', 'command -v lintian'], { reject: false })).exitCode !== 0) {
      process.stderr.write(`SKIPPED ${t.name}: lintian is not installed\n`);
      t.skip('needs lintian (apt-get install lintian)');
      return;
    }
    const deb = await builtPackage();
    // Errors only: the overrides (packaging/debian/lintian-overrides) say why each one left is so.
    const lint = await execa('lintian', ['--fail-on', 'error', deb], {
      reject: false,
    });
    assert.equal(lint.exitCode, 0, lint.stdout + lint.stderr);
  });

  test('apt install, enable, sync, upgrade keeping the config, remove, purge under systemd', {
    timeout: 30 * 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'mmdebstrap and systemd-nspawn')) return;
    const missing = await missingTools();
    if (missing.length > 0) {
      const reason = `needs ${missing.join(' and ')} (apt-get install mmdebstrap systemd-container)`;
      process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
      t.skip(reason);
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-deb-'));
    // In order: the container powered off, the lab's namespaces and processes gone, the files removed.
    const cleanups: (() => Promise<void>)[] = [() => rm(dir, { recursive: true, force: true })];
    t.after(async () => {
      for (const cleanup of cleanups) await cleanup();
    });
    const root = join(dir, 'root');
    const [deb, seconds] = await Promise.all([builtPackage(), makeDebianRoot(root)]);
    process.stderr.write(`deb-package: the Debian root took ${seconds.toFixed(0)} s\n`);
    // /var/tmp: the booted container's /tmp is a fresh tmpfs over the root's.
    await copyFile(deb, join(root, 'var/tmp/kproxy.deb'));
    await copyFile(await repackNewer(deb, dir), join(root, 'var/tmp/kproxy-newer.deb'));

    const lab = new Lab('deb');
    cleanups.unshift(() => lab.destroy());
    const topo = await Topology.create(lab, { podsPerNode: [1] });
    const node = topo.nodes[0]!;
    const [pod] = node.pods;
    const api = await standInApiServer(lab, node.ns);
    await api.post(NODES, sampleNode('node-0', node.ipv4));
    await api.post(SERVICES, sampleService('default', 'web', { clusterIP: CLUSTER_IP }));
    await api.post(
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-abc', {
        service: 'web',
        addresses: [pod!.ipv4],
        nodeName: 'node-0',
      }),
    );

    const machine = await boot(cleanups, root, node.ns, join(dir, 'console.log'));
    const kproxyTables = async () => (await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout;

    // Install: a node without node, npm or git gets the user, the unit (not enabled) and the command.
    assert.equal((await machine.run('sh', ['-c', 'command -v node npm git'], false)).stdout, '');
    await apt(machine, 'install', '/var/tmp/kproxy.deb');
    assert.equal((await machine.run('kproxy', ['--version'])).stdout.trim(), `kproxy ${VERSION}`);
    assert.match((await machine.run('id', [SERVICE_USER])).stdout, /\(kproxy\)/);
    assert.equal((await machine.run('systemctl', ['is-enabled', 'kproxy'], false)).stdout.trim(), 'disabled');
    assert.equal((await machine.run('stat', ['-c', '%G %a', CONFIG_PATH])).stdout.trim(), 'kproxy 640');

    // Enable, as the operator: a config and a kubeconfig readable by group kproxy.
    await writeFile(join(root, CONFIG_PATH), OPERATOR_CONFIG);
    await writeFile(join(root, 'etc/kproxy/kubeconfig'), standInKubeconfig(api.url), { mode: 0o640 });
    await machine.run('chgrp', [SERVICE_USER, '/etc/kproxy/kubeconfig']);
    await machine.systemctl('enable', '--now', 'kproxy');
    await machine.syncedAfter(0);
    assert.match(await kproxyTables(), /table ip kproxy/);
    const pid = await machine.systemctl('show', '--property=MainPID', '--value', 'kproxy');

    // Upgrade: the operator's config is kept as it is, the running kproxy restarted on the new build.
    const before = await machine.syncs();
    await apt(machine, 'install', '/var/tmp/kproxy-newer.deb');
    assert.equal((await machine.run('kproxy', ['--version'])).stdout.trim(), `kproxy ${VERSION}`);
    assert.match(
      (await machine.run('dpkg-query', ['-W', 'kproxy'])).stdout,
      new RegExp(`\\t${NEWER_VERSION.replace('+', '\\+')}$`),
    );
    assert.equal(await readFile(join(root, CONFIG_PATH), 'utf8'), OPERATOR_CONFIG);
    assert.equal((await machine.run('stat', ['-c', '%G', CONFIG_PATH])).stdout.trim(), SERVICE_USER);
    assert.notEqual(await machine.systemctl('show', '--property=MainPID', '--value', 'kproxy'), pid);
    await machine.syncedAfter(before);
    assert.equal(await machine.systemctl('is-enabled', 'kproxy'), 'enabled');

    // What a run in iptables mode leaves (kproxy's own dataplane, in both backends: a node may have
    // switched), and other owners' rules: an nft table and an iptables chain jumped to from the
    // hooks kproxy's chains hang on.
    const inNode = execaRunner(['ip', 'netns', 'exec', node.ns]);
    const iptablesState = ipv4([
      servicePort('web', { clusterIP: CLUSTER_IP, clusterEndpoints: [endpoint(pod!.ipv4)] }),
    ]);
    for (const backend of ['nft', 'legacy'] as const) {
      const iptables = new IptablesDataplane({ runner: inNode, backend });
      await iptables.start();
      await iptables.sync(iptablesState, 'full');
    }
    await lab.exec(node.ns, 'nft', [
      'add table ip foreign; add chain ip foreign c; add rule ip foreign c accept',
    ]);
    await lab.exec(node.ns, 'iptables-nft-restore', ['--noflush'], {
      input: '*nat\n:FOREIGN - [0:0]\n-I PREROUTING 1 -j FOREIGN\n-A FOREIGN -j RETURN\nCOMMIT\n',
    });
    const iptablesKproxyLines = async () => {
      const saves = ['iptables-nft-save', 'iptables-legacy-save'].map((save) => lab.exec(node.ns, save, []));
      return (await Promise.all(saves))
        .flatMap(({ stdout }) => stdout.split('\n'))
        .filter((line) => line.includes('KPROXY'));
    };
    const foreignRules = async () => [
      (await lab.exec(node.ns, 'nft', ['list', 'table', 'ip', 'foreign'])).stdout,
      ...(await lab.exec(node.ns, 'iptables-nft-save', [])).stdout
        .split('\n')
        .filter((line) => !line.startsWith('#') && !line.includes('KPROXY'))
        // A built-in chain's counters move with every packet.
        .map((line) => line.replace(/ \[\d+:\d+\]$/, '')),
    ];

    // Remove: stopped, the rules left as any stop leaves them, the config kept.
    const iptablesLeft = await iptablesKproxyLines();
    await apt(machine, 'remove', 'kproxy');
    assert.equal((await machine.run('systemctl', ['is-active', 'kproxy'], false)).stdout.trim(), 'inactive');
    assert.match(await kproxyTables(), /table ip kproxy/);
    assert.deepEqual(await iptablesKproxyLines(), iptablesLeft);
    assert.ok(
      iptablesLeft.some((line) => line.startsWith('-A PREROUTING')),
      iptablesLeft.join('\n'),
    );
    assert.equal(await readFile(join(root, CONFIG_PATH), 'utf8'), OPERATOR_CONFIG);
    assert.equal((await machine.run('test', ['-e', '/usr/lib/kproxy'], false)).exitCode, 1);

    // Purge: the config (the kubeconfig with it) and kproxy's rules gone, nothing else.
    const foreign = await foreignRules();
    await apt(machine, 'purge', 'kproxy');
    assert.equal((await machine.run('test', ['-e', '/etc/kproxy'], false)).exitCode, 1);
    assert.equal((await machine.run('test', ['-e', '/var/lib/kproxy'], false)).exitCode, 1);
    assert.doesNotMatch(await kproxyTables(), /kproxy/);
    assert.deepEqual(await iptablesKproxyLines(), []);
    assert.deepEqual(await foreignRules(), foreign);
  });
});
