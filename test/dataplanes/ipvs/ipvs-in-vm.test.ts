// The IPVS kernel tests. The host kernel has no ip_vs (and no dummy links), so the tests in vm/
// run inside a throwaway qemu VM with Debian's kernel (harness/vm.ts, over scripts/ipvs-in-qemu.sh,
// which installs qemu with apt when missing and caches the initrd in /var/cache/ipvs-qemu); this
// test boots it and checks that every in-VM test passed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requireRoot } from '../../../harness/netns.ts';
import { runNodeTestsInVm } from '../../../harness/vm.ts';

test('IPVS kernel tests pass inside the qemu VM', { timeout: 10 * 60_000 }, async (t) => {
  if (!requireRoot(t, 'booting the IPVS test VM (qemu, apt)')) return;
  const result = await runNodeTestsInVm(['test/dataplanes/ipvs/vm/*.vmtest.ts'], { timeoutMs: 9 * 60_000 });
  assert.equal(result.exitCode, 0, `in-VM tests failed (exit ${result.exitCode}):\n${result.output}`);
  assert.ok(
    result.pass >= 10,
    `expected the in-VM tests to run and pass, got ${result.pass}:\n${result.output}`,
  );
  assert.equal(result.fail, 0, result.output);
});
