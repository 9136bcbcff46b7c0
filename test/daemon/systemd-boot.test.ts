// The unit under a real systemd as PID 1: a Debian root made with mmdebstrap, booted with
// `systemd-nspawn -b` inside the node namespace of a lab topology (so the container's kproxy
// programs that namespace and nothing of the host's). There, as an operator would: `kproxy install`
// (creates the kproxy user), `systemctl enable --now kproxy` against the stand-in API server,
// rules synced by the unprivileged service and real connections through them, a map element deleted
// under it is reported by the drift gauge, repaired, counted and logged with its Service (the unit
// allows no scratch namespace: the comparison must work without one), a restart keeps an
// established connection, a stop leaves the rules, `kproxy cleanup` removes them; then the same in
// the iptables mode for a flushed Service chain; and `systemd-analyze security` scores the unit at
// most 2.0.
// Slow the first time (~90 packages downloaded and unpacked: minutes; debian-machine.ts keeps the
// root for the deb test and later runs, each booting a copy of its own). Skipped LOUDLY without
// root, mmdebstrap or systemd-nspawn.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { standInKubeconfig } from '../../harness/apiserver/kubeconfig.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { Topology, tally } from '../../harness/topology.ts';
import { heldConnection } from '../../lab/echo-output.ts';
import {
  APP_DIR,
  COMMAND_PATH,
  CONFIG_PATH,
  install,
  NODE_PATH,
  SERVICE_USER,
} from '../../src/cli/install.ts';
import { ENDPOINT_SLICES, NODES, SERVICES } from '../../src/kube/resources.ts';
import { metricSample } from '../support/metrics.ts';
import { eventually } from './daemon-harness.ts';
import { boot, makeDebianRoot, missingTools, standInApiServer } from './debian-machine.ts';

const CLUSTER_IP = '10.96.0.10';
const NODE_PORT = 30080;
/** The score `systemd-analyze security` gives a well-confined service ("OK" is up to 4.9). */
const MAX_EXPOSURE = 2.0;
/**
 * The integrity check runs every sync period and the drift gauge shows what it found until the
 * next check a period later (sync-loop.ts): 8 s leaves seconds for the scrapes after the comparison
 * and the repair (~1-5 s on a loaded 2-core machine), as drift-netns.test.ts measured.
 */
const SYNC_PERIOD_S = 8;
/** The check that finds the damage runs within a period; its comparison and repair, within a sync's deadline. */
const DRIFT_DEADLINE_MS = 2 * SYNC_PERIOD_S * 1000 + 60_000;

/** The operator's configuration for `mode`. */
function configuration(mode: 'nftables' | 'iptables'): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ${mode}
hostnameOverride: node-0
clusterCIDR: 10.244.0.0/16
syncPeriod: ${SYNC_PERIOD_S}s
minSyncPeriod: 100ms
clientConnection:
  kubeconfig: /etc/kproxy/kubeconfig
`;
}

describe('kproxy.service under systemd as PID 1 (mmdebstrap + systemd-nspawn)', () => {
  // debootstrap alone took ~6-11 min on a busy 2-core machine (mmdebstrap ~3): the bound keeps
  // that margin over the suite's 10 min default, the install (tsc) and the boot added.
  test('install, enable --now, sync, restart under traffic, stop, cleanup, security score', {
    timeout: 30 * 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'mmdebstrap and systemd-nspawn')) return;
    const missing = await missingTools();
    if (missing.length > 0) {
      const reason = `needs ${missing.join(' and ')} (apt-get install mmdebstrap systemd-container); no VM fallback`;
      process.stderr.write(`SKIPPED ${t.name}: ${reason}\n`);
      t.skip(reason);
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), 'kproxy-boot-'));
    // In order: the container powered off, the lab's namespaces and processes gone, the root removed.
    const cleanups: (() => Promise<void>)[] = [() => rm(dir, { recursive: true, force: true })];
    t.after(async () => {
      for (const cleanup of cleanups) await cleanup();
    });
    const root = join(dir, 'root');

    const seconds = await makeDebianRoot(root);
    process.stderr.write(`systemd-boot: the Debian root took ${seconds.toFixed(0)} s\n`);

    // The app as a package would ship it (no user: that is `kproxy install`'s job on the node),
    // hardlinked into the container's root.
    const stage = join(dir, 'stage');
    await install(stage);
    await execa('cp', ['-al', join(stage, APP_DIR), join(root, APP_DIR)]);

    const lab = new Lab('boot');
    cleanups.unshift(() => lab.destroy());
    const topo = await Topology.create(lab, { podsPerNode: [1] });
    const node = topo.nodes[0]!;
    const [pod] = node.pods;
    await topo.startEcho(pod!, { tcp: [8080] });
    const api = await standInApiServer(lab, node.ns);
    const service = sampleService('default', 'web', { clusterIP: CLUSTER_IP });
    const spec = service.spec as { type: string; ports: Record<string, unknown>[] };
    spec.type = 'NodePort';
    spec.ports[0]!.nodePort = NODE_PORT;
    await api.post(NODES, sampleNode('node-0', node.ipv4));
    await api.post(SERVICES, service);
    await api.post(
      ENDPOINT_SLICES,
      sampleEndpointSlice('default', 'web-abc', {
        service: 'web',
        addresses: [pod!.ipv4],
        nodeName: 'node-0',
      }),
    );

    const bootStarted = Date.now();
    const machine = await boot(cleanups, root, node.ns, join(dir, 'console.log'));
    process.stderr.write(`systemd-boot: booted in ${((Date.now() - bootStarted) / 1000).toFixed(1)} s\n`);

    // kproxy install on the node, twice: the second finds everything in place.
    const installer = [join(APP_DIR, 'bin/kproxy.js'), 'install'];
    assert.match(
      (await machine.run(NODE_PATH, installer)).stdout,
      /created the kproxy system user and group/,
    );
    assert.match((await machine.run(NODE_PATH, installer)).stdout, /the kproxy user exists/);
    await machine.run(COMMAND_PATH, ['version']);

    // The operator's part: a configuration and a kubeconfig readable by group kproxy.
    await writeFile(join(root, CONFIG_PATH), configuration('nftables'));
    await writeFile(join(root, '/etc/kproxy/kubeconfig'), standInKubeconfig(api.url), { mode: 0o640 });
    await machine.run('chgrp', [SERVICE_USER, '/etc/kproxy/kubeconfig']);

    await machine.systemctl('daemon-reload');
    await machine.systemctl('enable', '--now', 'kproxy');
    await machine.syncedAfter(0);

    // Unprivileged, with exactly its two capabilities, ambient (inherited by nft, iptables, ...).
    const pid = await machine.systemctl('show', '--property=MainPID', '--value', 'kproxy');
    const status = (await machine.run('cat', [`/proc/${pid}/status`])).stdout;
    const uid = (await machine.run('id', ['-u', SERVICE_USER])).stdout.trim();
    assert.match(status, new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s`, 'm'));
    assert.notEqual(uid, '0');
    for (const set of ['CapEff', 'CapPrm', 'CapAmb', 'CapBnd']) {
      // CAP_NET_ADMIN (12) and CAP_NET_RAW (13).
      assert.match(status, new RegExp(`^${set}:\\s+0000000000003000$`, 'm'), set);
    }
    // The conntrack timeouts of this namespace were written by the kproxy user (kube-proxy's 24 h).
    const established = await lab.exec(node.ns, 'cat', [
      '/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established',
    ]);
    assert.equal(established.stdout.trim(), '86400');

    // Real connections through the rules: from outside to the NodePort, and a held one.
    await eventually('the NodePort answers', async () =>
      tally(await topo.connect(topo.client.ns, 'tcp', node.ipv4, NODE_PORT, { timeoutMs: 1000 })).has(
        pod!.name,
      ),
    );
    const holder = await topo.holdConnection(topo.client.ns, node.ipv4, NODE_PORT);
    const held = heldConnection(holder.output, () => holder.kill());
    assert.equal(held.backend, pod!.name);

    // An endpoint's map element deleted under the service: the check finds it, the comparison
    // names it (the gauge, before the repair), the repair is counted and logged with the Service.
    const metrics = async () =>
      (await lab.exec(node.ns, 'curl', ['-sSf', 'http://127.0.0.1:10249/metrics'])).stdout;
    /** Scrapes until `gauge` counts a missing piece: the scrape that did. */
    const missingShown = async (what: string, gauge: string) => {
      let shown = '';
      await eventually(
        what,
        async () => {
          shown = await metrics();
          return (metricSample(shown, gauge) ?? 0) > 0;
        },
        DRIFT_DEADLINE_MS,
      );
      return shown;
    };
    const missingGauge = 'kproxy_sync_proxy_rules_drift{mode="nftables",kind="missing"}';
    const repairs = 'kproxy_sync_proxy_rules_drift_repairs_total{mode="nftables"}';
    assert.equal(metricSample(await metrics(), repairs), 0);
    const scraping = missingShown('the drift gauge shows the deleted element', missingGauge);
    await lab.exec(node.ns, 'nft', [
      'delete',
      'element',
      'ip',
      'kproxy',
      'backends-tcp',
      `{ ${CLUSTER_IP} . 80 . 0 }`,
    ]);
    const journal = async () => (await machine.run('journalctl', ['-u', 'kproxy', '-o', 'cat'])).stdout;
    await eventually(
      'the repair is logged',
      async () =>
        /repaired drifted rules|repaired rules the integrity check found damaged/.test(await journal()),
      DRIFT_DEADLINE_MS,
    );
    const repairLine = (await journal()).split('\n').find((line) => /"repaired (drifted )?rules/.test(line));
    assert.match(
      repairLine!,
      /"repaired drifted rules" .*service="default\/web:80\/TCP"/,
      'compared, not unknown',
    );
    assert.match(repairLine!, /missing in ip kproxy map backends-tcp: 10\.96\.0\.10 \. 80 \. 0 : /);
    const drifted = await scraping;
    assert.equal(metricSample(drifted, missingGauge), 1, drifted);
    assert.equal(metricSample(await metrics(), repairs), 1);
    assert.equal(
      metricSample(await metrics(), 'kproxy_sync_proxy_rules_drift{mode="nftables",kind="extra"}'),
      0,
    );
    // Logged once the repairing sync is done: the element is back.
    assert.match(
      (await lab.exec(node.ns, 'nft', ['list', 'map', 'ip', 'kproxy', 'backends-tcp'])).stdout,
      /10\.96\.0\.10 \. 80 \. 0 : /,
    );
    // The check's scratch tables die with the nft that made them: none is left in the node.
    assert.doesNotMatch((await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout, /kproxy-drift/);

    const before = await machine.syncs();
    await machine.systemctl('restart', 'kproxy');
    await machine.syncedAfter(before);
    assert.notEqual(await machine.systemctl('show', '--property=MainPID', '--value', 'kproxy'), pid);
    assert.ok(await held.alive(), `the held connection survived the restart: ${holder.output()}`);

    await machine.systemctl('stop', 'kproxy');
    assert.equal(await machine.systemctl('show', '--property=Result', '--value', 'kproxy'), 'success');
    const logs = (await machine.run('journalctl', ['-u', 'kproxy', '-o', 'cat'])).stdout;
    assert.match(logs, /"stopped; rules left in place"/);
    assert.match((await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout, /table ip kproxy/);
    assert.ok(await held.alive(), `the held connection echoes while kproxy is stopped: ${holder.output()}`);
    assert.deepEqual(
      [...tally(await topo.connect(topo.client.ns, 'tcp', node.ipv4, NODE_PORT)).keys()],
      [pod!.name],
      'new connections work while kproxy is stopped',
    );
    await held.close();

    await machine.run(COMMAND_PATH, ['cleanup']);
    assert.doesNotMatch((await lab.exec(node.ns, 'nft', ['list', 'tables'])).stdout, /kproxy/);

    // The iptables mode under the same unit: its comparison needs no scratch namespace either (the
    // render respelled as iptables-save lists it): a flushed Service chain is reported rule by rule,
    // repaired and logged with its Service.
    await writeFile(join(root, CONFIG_PATH), configuration('iptables'));
    const iptablesStart = await machine.syncs();
    await machine.systemctl('start', 'kproxy');
    await machine.syncedAfter(iptablesStart);
    const save = async () => (await machine.run('iptables-save', ['-t', 'nat'])).stdout;
    const saved = await save();
    const chain = /^-A (KPROXY-SVC-\S+) .*--comment "default\/web:80\/TCP cluster IP"/m.exec(saved)?.[1];
    assert.ok(chain, saved);
    const rulesOf = (text: string) => text.split('\n').filter((line) => line.startsWith(`-A ${chain} `));
    const chainRules = rulesOf(saved).length;
    assert.ok(chainRules > 0, saved);
    const iptablesMissing = 'kproxy_sync_proxy_rules_drift{mode="iptables",kind="missing"}';
    const iptablesScraping = missingShown('the drift gauge shows the flushed chain', iptablesMissing);
    await machine.run('iptables', ['-t', 'nat', '-F', chain]);
    const iptablesDrifted = await iptablesScraping;
    assert.equal(metricSample(iptablesDrifted, iptablesMissing), chainRules, iptablesDrifted);
    const flushedLine = (text: string) =>
      text.split('\n').find((line) => line.includes(`missing in IPv4 nat chain ${chain}: `));
    await eventually(
      'the repair is logged',
      async () => flushedLine(await journal()) !== undefined,
      DRIFT_DEADLINE_MS,
    );
    assert.match(flushedLine(await journal())!, /"repaired drifted rules" .*service="default\/web:80\/TCP"/);
    assert.equal(rulesOf(await save()).length, chainRules, 'the chain is whole again');
    await machine.systemctl('stop', 'kproxy');
    await machine.run(COMMAND_PATH, ['cleanup']);
    assert.doesNotMatch(await save(), /KPROXY/);

    const security = await machine.run(
      'systemd-analyze',
      ['security', '--no-pager', 'kproxy.service'],
      false,
    );
    const score = /Overall exposure level for kproxy\.service: (\d+\.\d+)/.exec(security.stdout)?.[1];
    process.stderr.write(`systemd-boot: systemd-analyze security kproxy.service: ${score}\n`);
    assert.ok(score !== undefined, security.stdout);
    assert.ok(Number(score) <= MAX_EXPOSURE, security.stdout);
  });
});
