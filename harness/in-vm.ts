// Kernel test files run inside the qemu VM (harness/vm.ts): the files written for the VM, and the
// files that run once per mode, for the modes this kernel cannot run (IPVS without ip_vs). One test
// here, passing when each file ran all its tests there and none failed. Few boots, since under TCG a
// boot and the first start of each node program (cold compile cache) cost minutes; more than one,
// since one emulated CPU running them all was the suite's long pole.
import assert from 'node:assert/strict';
import { join, matchesGlob, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { requireRoot } from './netns.ts';
import type { TestCounts } from './test-counts-reporter.ts';
import { modesForVm, runNodeTestsInVm } from './vm.ts';

const REPO = fileURLToPath(new URL('../', import.meta.url));
/** A boot under TCG on a busy machine: ~20-40 s. */
const BOOT_MS = 2 * 60_000;
/**
 * One file (relative to the repository) to run alone in the VM, e.g.
 * KPROXY_VM_ONLY=test/dataplanes/ipvs/vm/live.vmtest.ts: to time or debug it without the rest.
 */
const ONLY_ENV = 'KPROXY_VM_ONLY';

export type VmTestFiles =
  /** A file that runs once per mode (modesHere()); in the VM only for the modes the host lacks. */
  | {
      readonly kind: 'per-mode';
      readonly path: string;
      readonly testsPerMode: number;
      readonly budgetMs: number;
    }
  /** Files (a glob) written for the VM only: they run there whatever the host. */
  | { readonly kind: 'vm-only'; readonly glob: string; readonly atLeast: number; readonly budgetMs: number };

function pathOf(files: VmTestFiles): string {
  return files.kind === 'per-mode' ? files.path : files.glob;
}

/** The counts of the files `files` names (relative to the repository), summed. */
function countsOf(run: Readonly<Record<string, TestCounts>>, files: VmTestFiles): TestCounts {
  const pattern = join(REPO, pathOf(files));
  const sum: TestCounts = { pass: 0, fail: 0, skipped: 0, todo: 0 };
  for (const [file, counts] of Object.entries(run)) {
    if (!matchesGlob(file, pattern)) continue;
    sum.pass += counts.pass;
    sum.fail += counts.fail;
    sum.skipped += counts.skipped;
    sum.todo += counts.todo;
  }
  return sum;
}

/**
 * Registers the test that runs `boots` in the qemu VM: each inner list in its own boot, all boots at
 * once, each file of a boot in order. The one emulated CPU is the VM's long pole, so its files are
 * split across boots of one CPU each (a machine's second core then works for them while the host's
 * own tests wait on the kernel or the clock). `budgetMs` per entry is how long it may take there
 * (each ~10-15× as long as on the host, harness/emulation.ts): a boot's deadline is its files' sum
 * plus a boot, and bounds a hang.
 */
export function testFilesInVm(what: string, boots: readonly (readonly VmTestFiles[])[]): void {
  const modes = modesForVm();
  const only = process.env[ONLY_ENV];
  const plans = boots
    .map((files) =>
      files
        .filter((f) => f.kind === 'vm-only' || modes.length > 0)
        .filter((f) => only === undefined || matchesGlob(only, pathOf(f))),
    )
    .filter((files) => files.length > 0)
    .map((files) => ({ files, deadlineMs: BOOT_MS + files.reduce((sum, f) => sum + f.budgetMs, 0) }));
  test(`${what}: inside the qemu VM${modes.length ? ` (${modes.join(', ')})` : ''}`, {
    timeout: Math.max(0, ...plans.map((p) => p.deadlineMs)) + 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'booting the qemu VM (qemu, apt)')) return;
    const boots = await Promise.all(
      plans.map(async ({ files, deadlineMs }, i) => ({
        files,
        name: `boot ${i + 1} of ${plans.length}`,
        run: await runNodeTestsInVm(only === undefined ? files.map(pathOf) : [only], {
          modes,
          timeoutMs: deadlineMs,
        }),
      })),
    );
    for (const { run, name } of boots) {
      t.diagnostic(`${name}: the VM run took ${Math.round(run.durationMs / 1000)} s, boot included`);
      for (const [file, report] of Object.entries(run.files))
        t.diagnostic(`${relative(REPO, file)}: ${Math.round(report.wallMs / 1000)} s in the VM`);
    }
    for (const { run, files, name } of boots) {
      assert.equal(
        run.exitCode,
        0,
        `the tests of ${name} failed in the VM (exit ${run.exitCode}):\n${run.output}`,
      );
      for (const entry of files) {
        const counts = countsOf(run.files, entry);
        const where = `${pathOf(entry)} in the VM: ${JSON.stringify(counts)}\n${run.output}`;
        assert.equal(counts.fail, 0, where);
        // A todo test (a known bug pinned) counts as run.
        const ran = counts.pass + counts.todo;
        if (entry.kind === 'per-mode') assert.equal(ran, entry.testsPerMode * modes.length, where);
        // One file of the glob alone (ONLY_ENV) runs some of its tests.
        else assert.ok(ran >= (only === undefined ? entry.atLeast : 1), where);
      }
    }
  });
}
