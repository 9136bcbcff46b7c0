// The kernel tests of the modes this kernel cannot run, in two boots at once of the qemu VM with
// Debian's kernel (harness/in-vm.ts; the host kernel has no ip_vs, nor dummy links): the IPVS tests
// written for the VM, and the files that run once per mode (the daemon end to end, the netns lab)
// for the modes the host lacks. On the host those files run only the modes it can.
import { testFilesInVm } from '../harness/in-vm.ts';
import { ALL_SCENARIOS } from '../lab/scenarios/all.ts';

// The boots are balanced by the files' times in the VM of a clean-clone run at load ~2 (52cfeea:
// 942 s in one boot): daemon-netns 285 s, netns-lab 185, live 108, daemon-versions 106, diff 96,
// drift 76, trace-prediction 49, kube-proxy-leftovers 37. Each file's diagnostics give its time.
// Earlier figures, one boot: at load ~15 (qemu got a quarter of a core) the daemon file took
// 15.6 min; at load 15-18 live.vmtest 4.2 min (10.5 with a node start per probe).
testFilesInVm('the kernel tests this kernel cannot run', [
  [
    { kind: 'vm-only', glob: 'test/dataplanes/ipvs/vm/*.vmtest.ts', atLeast: 10, budgetMs: 15 * 60_000 },
    // The daemon's drift report under tampering: 40-60 s a mode on the host at load ~16, 468 s
    // here (IPVS, boot aside) at load ~15.
    { kind: 'per-mode', path: 'test/daemon/drift-netns.test.ts', testsPerMode: 1, budgetMs: 15 * 60_000 },
    // Ten minors: ~30 s a mode on the host at load 9.
    {
      kind: 'per-mode',
      path: 'test/daemon/daemon-versions-netns.test.ts',
      testsPerMode: 1,
      budgetMs: 15 * 60_000,
    },
  ],
  [
    { kind: 'per-mode', path: 'test/daemon/daemon-netns.test.ts', testsPerMode: 3, budgetMs: 20 * 60_000 },
    // The netns lab's IPVS run took 15 min at load ~9 (a node start per probe then).
    {
      kind: 'per-mode',
      path: 'test/lab/netns-lab.test.ts',
      testsPerMode: ALL_SCENARIOS.length,
      budgetMs: 25 * 60_000,
    },
  ],
]);
