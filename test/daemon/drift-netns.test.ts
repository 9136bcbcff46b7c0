// The daemon's drift report on the real kernel (issue 32): `kproxy run` in a lab node namespace,
// its rules tampered with as an operator or another tool would (a map element deleted, a Service
// chain flushed); the integrity check finds it, and before the repair the comparison `kproxy diff`
// prints names what differed: the drift gauge shows it, the repair counter counts the repair, one
// log line names the Service port and what was repaired, and the rules are whole again.
// Runs for the modes this kernel runs, and in the qemu VM (test/in-vm.test.ts) for IPVS (a changed
// weight).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import { requireRoot } from '../../harness/netns.ts';
import { modesHere } from '../../harness/vm.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { metricSample } from '../support/metrics.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLUSTER_IP,
  type Cluster,
  cluster,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  webService,
  webSlice,
} from './netns-cluster.ts';

/**
 * The check runs every sync period; the gauge shows what the check found from its comparison until
 * the next check, a period after it began (sync-loop.ts): with 8 s, seconds for the scrapes (each
 * well under a second on a loaded 2-core machine) after the comparison and the repair (~1-5 s).
 */
const SYNC_PERIOD = '8s';
/** Detection within two periods (the iptables check reads a table in one, compares it by the next). */
const DETECTED_WITHIN_MS = 2 * 8_000 + SYNC_DEADLINE_MS;

/** What the tampering takes or changes, as the repair's log line names it. */
interface Tampered {
  readonly kind: 'missing' | 'different';
  readonly where: string;
  readonly text: RegExp;
}

const TAMPER: Record<DataplaneMode, (c: Cluster) => Promise<Tampered>> = {
  async nftables(c) {
    const element = `{ ${CLUSTER_IP} . 80 . 0 }`;
    await nodeCommand(c, 'nft', ['delete', 'element', 'ip', 'kproxy', 'backends-tcp', element]);
    return {
      kind: 'missing',
      where: 'ip kproxy map backends-tcp',
      text: /10\.96\.0\.10 \. 80 \. 0 : 10\.\d+\.\d+\.\d+ \. 8080/,
    };
  },
  async iptables(c) {
    const saved = await nodeCommand(c, 'iptables-save', ['-t', 'nat']);
    const chain = /-A (KPROXY-SVC-\S+) .*--comment "?default\/web:80\/TCP/.exec(saved)![1]!;
    await nodeCommand(c, 'iptables', ['-t', 'nat', '-F', chain]);
    return {
      kind: 'missing',
      where: `IPv4 nat chain ${chain}`,
      text: /--comment "default\/web:80\/TCP -> 10\.\d+\.\d+\.\d+:8080" .* -j KPROXY-/,
    };
  },
  async ipvs(c) {
    const pod = c.topo.nodes[0]!.pods[0]!.ipv4;
    await nodeCommand(c, 'ipvsadm', ['-e', '-t', `${CLUSTER_IP}:80`, '-r', `${pod}:8080`, '-m', '-w', '3']);
    return {
      kind: 'different',
      where: `ipvs virtual server TCP ${CLUSTER_IP}:80`,
      text: new RegExp(`-r ${pod.replaceAll('.', '\\.')}:8080 -m -w 3 \\(kproxy holds .* -w 1\\)$`),
    };
  },
};

async function nodeCommand(c: Cluster, command: string, args: string[]): Promise<string> {
  const result = await c.topo.lab.exec(c.nodeNs, command, args, { reject: false });
  assert.equal(result.exitCode, 0, `${command} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

for (const mode of modesHere()) {
  describe(`daemon drift report (${mode})`, () => {
    test('tampering under a running daemon: gauge, repair counter and a log line naming the Service', async (t) => {
      if (!requireRoot(t)) return;
      const c = await cluster(t, mode);
      const [pod0, pod1] = c.topo.nodes[0]!.pods;
      await c.write('POST', SERVICES, webService());
      await c.write('POST', ENDPOINT_SLICES, webSlice([pod0!.ipv4, pod1!.ipv4]));
      const daemon = c.startDaemon(mode, ['--iptables-sync-period', SYNC_PERIOD]);
      t.after(() => daemon.kill());
      await daemon.waitFor('"rules synced"', SYNC_DEADLINE_MS);
      await eventually('both pods answer on the ClusterIP', async () => {
        const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80);
        return seen.has(pod0!.name) && seen.has(pod1!.name);
      });
      const metrics = async () => (await c.get('http://127.0.0.1:10249/metrics')).body;
      const gauge = (kind: string) => `kproxy_sync_proxy_rules_drift{mode="${mode}",kind="${kind}"}`;
      const repairs = `kproxy_sync_proxy_rules_drift_repairs_total{mode="${mode}"}`;
      const before = await metrics();
      assert.equal(metricSample(before, repairs), 0);
      assert.equal(metricSample(before, gauge('missing')), 0);

      // Scraped from the tampering on: the gauge shows the damage from the comparison (before the
      // repair) until the next check, so the first scrape that shows it is within that window.
      const drifted = (body: string) =>
        ['missing', 'different'].some((kind) => (metricSample(body, gauge(kind)) ?? 0) > 0);
      let seen: string | undefined;
      const scraping = eventually(
        'the drift gauge shows the damage',
        async () => {
          seen = await metrics();
          return drifted(seen);
        },
        DETECTED_WITHIN_MS,
      );
      const tampered = await TAMPER[mode]!(c);
      const line = await daemon.waitFor('"repaired drifted rules"', DETECTED_WITHIN_MS);
      await scraping;
      const after = await metrics();

      assert.match(line, /^W\d{4} /, `a warning in klog's text format: ${line}`);
      assert.match(line, / service="default\/web:80\/TCP" /);
      const repaired = JSON.parse(/ repaired=(\[.*\])$/.exec(line)![1]!) as string[];
      assert.ok(repaired.length > 0);
      for (const piece of repaired)
        assert.ok(piece.startsWith(`${tampered.kind} in ${tampered.where}: `), piece);
      assert.ok(
        repaired.some((piece) => tampered.text.test(piece)),
        `the piece taken away is named: ${repaired.join('; ')}`,
      );
      assert.equal(metricSample(after, repairs), 1);
      for (const kind of ['missing', 'extra', 'different'])
        assert.equal(metricSample(seen!, gauge(kind)), kind === tampered.kind ? repaired.length : 0, seen);
      assert.equal(
        daemon.output().split('"repaired drifted rules"').length - 1,
        1,
        'one line: one Service port drifted',
      );

      await eventually('both pods answer again after the repair', async () => {
        const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80);
        return seen.has(pod0!.name) && seen.has(pod1!.name);
      });
      await eventually(
        'the gauge back at 0 once a check finds the rules intact',
        async () => metricSample(await metrics(), gauge(tampered.kind)) === 0,
        DETECTED_WITHIN_MS,
      );
      assert.equal(metricSample(await metrics(), repairs), 1, 'one repair');
      await daemon.stop(STOP_DEADLINE_MS);
    });
  });
}
