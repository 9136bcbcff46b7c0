// A kernel test file's modes that this kernel cannot run (IPVS without ip_vs): the same file, run
// inside the qemu VM (harness/vm.ts) for just those modes, as one test here that passes when every
// test there did. One boot per file.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { modesForVm, runNodeTestsInVm } from './vm.ts';
import { requireRoot } from './netns.ts';

/**
 * Bounds a hang: a boot (~20-40 s under TCG on a busy machine), then the file's tests for the
 * modes, each ~10-15× as long as on the host (harness/emulation.ts): the netns lab's IPVS run took
 * 15 min on a 2-core machine at load ~9.
 */
const VM_FILE_DEADLINE_MS = 25 * 60_000;

/** Registers the test that runs `file` in the VM; `testsPerMode`: how many tests it has for each mode. */
export function testInVm(file: string, what: string, testsPerMode: number): void {
  const modes = modesForVm();
  if (modes.length === 0) return;
  test(`${what} (${modes.join(', ')}): this file's tests inside the qemu VM`, {
    timeout: VM_FILE_DEADLINE_MS + 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'booting the qemu VM (qemu, apt)')) return;
    const run = await runNodeTestsInVm([file], { modes, timeoutMs: VM_FILE_DEADLINE_MS });
    t.diagnostic(`the VM run took ${Math.round(run.durationMs / 1000)} s, boot included`);
    assert.equal(run.exitCode, 0, `the tests failed in the VM (exit ${run.exitCode}):\n${run.output}`);
    assert.equal(run.fail, 0, run.output);
    // A todo test (a known bug pinned) counts as run.
    assert.equal(
      run.pass + run.todo,
      testsPerMode * modes.length,
      `every test ran and passed in the VM:\n${run.output}`,
    );
  });
}
