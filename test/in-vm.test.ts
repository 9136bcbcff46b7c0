// The kernel tests of the modes this kernel cannot run, in ONE boot of the qemu VM with Debian's
// kernel (harness/in-vm.ts; the host kernel has no ip_vs, nor dummy links): the IPVS tests written
// for the VM, and the files that run once per mode (the daemon end to end, the netns lab) for the
// modes the host lacks. On the host those files run only the modes it can.
// Two groups at once, one vCPU each, a group's files one after another (node runs them in path
// order; the VM's diagnostics give each group's time and each file's). live and trace-prediction
// make the VM's own namespace the node, so they share a group; every other file works in lab
// namespaces named after its process (harness/netns.ts), as on the host, where the per-mode files
// run two at a time. The groups are cut by the files' times alone (quiet machine, load 4-8, one
// vCPU, 6681eaf; 1,760 s in all, boot included): the takeover file 708 s, diff 96, the drain 43
// against the netns lab 277, daemon 171, live 169, trace-prediction 74, drift 74, versions 69,
// leftovers 26. In two groups (1b8c24e) at load 17-30 (mean 23, another session's benches): 2,036 s,
// the groups 1,818 and 1,965 s, each file ~2.2× its time above; qemu had ~0.9 of a core in both
// runs (2 vCPUs, 1). In a fresh-clone `npm test` at bd8ac8a: quiet, the VM lane 1,081 s against
// 1,248-1,385 s with one vCPU (the second vCPU gets the core the host's lane leaves); beside two
// `yes`, 1,767 s against 1,639 (one core for both vCPUs). MTTCG itself, a CPU-bound node loop in
// the guest at load 12-16: one vCPU, one loop 19-20 s and two at once 42-45 s; two vCPUs, one
// 21-22 s and two at once 29-37 s.
import assert from 'node:assert/strict';
import { globSync } from 'node:fs';
import { matchesGlob } from 'node:path';
import { test } from 'node:test';
import { testFilesInVm, type VmTestFiles } from '../harness/in-vm.ts';
import { ALL_SCENARIOS } from '../lab/scenarios/all.ts';

/** Where the files written for the VM are: each must be in a group's glob. */
const VM_FILES = 'test/dataplanes/ipvs/vm/*.vmtest.ts';

const GROUPS: readonly (readonly VmTestFiles[])[] = [
  [
    // Figures from when the files ran one at a time, in one group. Figures on a 2-core
    // machine at load ~15 (qemu got a quarter of a core): the daemon file 15.6 min, the VM tests
    // 8 min. At load 8-11: the daemon file 17.6 min, trace-prediction 5.6, kube-proxy-leftovers 0.8;
    // at load 15-18 live.vmtest 4.2 min (10.5 with a node start per probe). With the harness' servers
    // writing their compile cache and a prober per namespace: the daemon file 5.5 min at load 5-8;
    // the VM tests 3.7 min at load 1-5 (live 2.0, trace-prediction 0.9, leftovers 0.8). Two boots
    // at once, one CPU each (a clean clone at load ~5, 6dffdab): each file took twice as long, the
    // boots 963 and 1111 s against 942 s for one, and the host's lane 23.5 min against 16.2. The
    // daemon file with one cluster for its tests (7231182): 374 s against 503 s, both runs at once.
    // With the repository in the guest's page cache (ipvs-in-qemu.sh's cache=loose) and the guest's
    // compile cache filled on the host: the whole run 940 s against 1,181 s, both at once at load 3-7
    // (daemon file 170 against 214 s, netns lab 249 against 400). The IPVS takeover file's two circles
    // from kube-proxy's iptables and nftables modes add 381 and 285 s (that file alone, load 2-5); in
    // the whole run (1,998 s, load 4-9) that file took 641 s and the VM-only files 1,115 s. With kproxy
    // run from one bundled file in the guest (harness/vm.ts), at load 12-13: the daemon file 128 s, the
    // netns lab 175 s, kube-proxy-leftovers 16 s (quiet, before: 210-250, 215-245 and 20 s).
    // The IPVS takeover file alone: 1,306 s at load 9-13, 620 s at load 11-12 once its held TCP
    // connections ticked every 500 ms and a probe's answer was no longer searched for in all the
    // prober had printed (the guest's CPU is ~99% busy while it probes: its traffic is the cost).
    // With four kinds of Service in both circles (20 connections a second over them all) and the
    // drains run by the node's agent: 384-475 s alone at load 4-7, against 417-674 s before in the
    // same hour; the chain through kproxy's iptables mode adds 114-155 s (alone, load 5-7).
    {
      kind: 'vm-only',
      glob: 'test/dataplanes/ipvs/vm/{kube-proxy-ipvs-takeover,diff,ipvs-drain-phantom}.vmtest.ts',
      atLeast: 12,
      budgetMs: 20 * 60_000,
    },
  ],
  [
    // The two that use the VM's own namespace, one after the other, and the leftovers' cleanup.
    {
      kind: 'vm-only',
      glob: 'test/dataplanes/ipvs/vm/{live,trace-prediction,kube-proxy-leftovers}.vmtest.ts',
      atLeast: 6,
      budgetMs: 10 * 60_000,
    },
    // Two of its three tests: the outage test's dataplane part is every mode's (its comment says why).
    { kind: 'per-mode', path: 'test/daemon/daemon-netns.test.ts', testsPerMode: 2, budgetMs: 20 * 60_000 },
    // The daemon's drift report under tampering: 40-60 s a mode on the host at load ~16, 468 s here
    // (IPVS, boot aside).
    { kind: 'per-mode', path: 'test/daemon/drift-netns.test.ts', testsPerMode: 1, budgetMs: 15 * 60_000 },
    // Ten minors: ~30 s a mode on the host at load 9; here IPVS walks three (the file says which):
    // four took 84 s (boot aside), all ten 124 s at load ~5.
    {
      kind: 'per-mode',
      path: 'test/daemon/daemon-versions-netns.test.ts',
      testsPerMode: 1,
      budgetMs: 15 * 60_000,
    },
    // The netns lab's IPVS run took 15 min at load ~9 (a node start per probe then).
    {
      kind: 'per-mode',
      path: 'test/lab/netns-lab.test.ts',
      testsPerMode: ALL_SCENARIOS.length,
      budgetMs: 25 * 60_000,
    },
  ],
];

test('every file written for the VM is in a group', () => {
  const globs = GROUPS.flat().flatMap((files) => (files.kind === 'vm-only' ? [files.glob] : []));
  const missed = globSync(VM_FILES).filter((file) => !globs.some((glob) => matchesGlob(file, glob)));
  assert.deepEqual(missed, []);
});

testFilesInVm('the kernel tests this kernel cannot run', GROUPS);
