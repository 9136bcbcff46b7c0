// `kproxy run` on the real kernel (nftables, iptables: the modes this kernel runs; see
// daemon-netns.test.ts for the lab) while its API server is upgraded through every Kubernetes minor
// a user may run, 1.29 -> 1.38 (harness/apiserver/profiles.ts): one daemon, one lab per mode, the
// stand-in restarted as each newer minor with its state kept, the way to 1.33 answering 503 while
// its paths install, resetting a connection and shedding load with 429. RBAC forbids ServiceCIDRs
// throughout (403 from 1.33, 404 before: a node-proxier role from before 1.33). After each upgrade
// a change of web's endpoints must reach real connections and /healthz must be 200.
// IPVS runs it in the qemu VM (test/in-vm.test.ts), over three of the minors (minorsOf);
// daemon-versions.test.ts walks the same minors with kproxy's model in-process.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import { MINORS, type Minor } from '../../harness/apiserver/profiles.ts';
import { requireRoot } from '../../harness/netns.ts';
import { modesHere } from '../../harness/vm.ts';
import { BACKOFF_MAX_MS } from '../../src/kube/backoff.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import {
  backends,
  CLEAN_EXIT,
  CLUSTER_IP,
  cluster,
  STOP_DEADLINE_MS,
  SYNC_DEADLINE_MS,
  webService,
  webSlice,
} from './netns-cluster.ts';

/** The upgrade to 1.33 as a client meets it (control-lines.ts), armed before the restart. */
const UPGRADE_FAULTS = ['fail 503 2', 'reset 1', 'fail 429 1 1'];
/**
 * After an upgrade the informers come back within their backoff, which those faults grow (five
 * failures: up to BACKOFF_MAX_MS), then sync; the bound of a hang, not a speed check.
 */
const FOLLOW_DEADLINE_MS = BACKOFF_MAX_MS + SYNC_DEADLINE_MS;
/**
 * The minors a mode walks. The walk tests the informer against each server, and the dataplane's part
 * is the same at every step, which the host's modes walk in full; IPVS runs emulated in the VM, ~12 s
 * a step, so it walks the oldest, the upgrade to 1.33 (the ServiceCIDR API and the faults) and the
 * newest.
 */
function minorsOf(mode: DataplaneMode): readonly Minor[] {
  return mode === 'ipvs' ? [MINORS[0], '1.33', MINORS.at(-1)!] : MINORS;
}

for (const mode of modesHere()) {
  describe(`kproxy run while its API server is upgraded 1.29 -> 1.38 (${mode})`, () => {
    test('after each upgrade an endpoint change reaches real connections; /healthz 200; ServiceCIDRs forbidden', async (t) => {
      if (!requireRoot(t)) return;
      const c = await cluster(t, mode, ['--version', minorsOf(mode)[0]!, '--forbid', 'servicecidrs']);
      const pods = c.topo.nodes[0]!.pods;
      await c.write('POST', SERVICES, webService());
      await c.write('POST', ENDPOINT_SLICES, webSlice([pods[0]!.ipv4]));
      const daemon = c.startDaemon();
      t.after(() => daemon.kill());
      await daemon.waitFor('"rules synced"', SYNC_DEADLINE_MS);

      for (const [step, minor] of minorsOf(mode).entries()) {
        if (step > 0) {
          if (minor === '1.33')
            for (const fault of UPGRADE_FAULTS) {
              c.api.send(`${fault}\n`);
              await c.api.waitFor(`armed ${fault}`);
            }
          c.api.send(`restart ${minor}\n`);
          await c.api.waitFor(`restarted ${minor}`);
        }
        const pod = pods[(step + 1) % 2]!;
        await c.write('PUT', ENDPOINT_SLICES, webSlice([pod.ipv4]));
        await eventually(
          `${minor}: only ${pod.name} answers on the ClusterIP`,
          async () => {
            const seen = await backends(c, c.nodeNs, CLUSTER_IP, 80, 4);
            return seen.size === 1 && seen.has(pod.name);
          },
          FOLLOW_DEADLINE_MS,
        );
        await eventually(
          `${minor}: /healthz 200`,
          async () => (await c.get('http://127.0.0.1:10256/healthz')).status === 200,
          FOLLOW_DEADLINE_MS,
        );
      }
      assert.deepEqual(await daemon.stop(STOP_DEADLINE_MS), CLEAN_EXIT, daemon.output());
    });
  });
}
