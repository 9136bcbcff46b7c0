// The IPVS kernel tests. The host kernel has no ip_vs (and no dummy links), so the tests in vm/
// run inside a throwaway qemu VM with Debian's kernel (scripts/ipvs-in-qemu.sh, which installs
// qemu with apt when missing and caches the initrd in /var/cache/ipvs-qemu); this test boots it
// and checks that every in-VM test passed.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { requireRoot } from '../../support/netns.ts';

const REPO = join(import.meta.dirname, '../../..');

test('IPVS kernel tests pass inside the qemu VM', { timeout: 10 * 60_000 }, async (t) => {
  if (!requireRoot(t, 'booting the IPVS test VM (qemu, apt)')) return;
  const result = await execa(
    'scripts/ipvs-in-qemu.sh',
    ['node_modules/.bin/node', '--test', '--test-reporter=spec', 'test/dataplanes/ipvs/vm/*.vmtest.ts'],
    // One vCPU: the VM then competes less with the other kernel tests running alongside (and
    // TCG was no slower with it here).
    { cwd: REPO, reject: false, all: true, timeout: 9 * 60_000, env: { IPVS_QEMU_SMP: '1' } },
  );
  const output = String(result.all);
  assert.equal(result.exitCode, 0, `in-VM tests failed (exit ${result.exitCode}):\n${output}`);
  const passed = Number(/ℹ pass (\d+)/.exec(output)?.[1] ?? 0);
  assert.ok(passed >= 10, `expected the in-VM tests to run and pass, got ${passed}:\n${output}`);
  assert.match(output, /ℹ fail 0/);
});
