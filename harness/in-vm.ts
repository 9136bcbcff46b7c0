// Kernel test files run inside the qemu VM (harness/vm.ts), ALL in one boot: the files written for
// the VM, and the files that run once per mode, for the modes this kernel cannot run (IPVS without
// ip_vs). One test here, passing when each file ran all its tests there and none failed. One boot
// for all, since under TCG a boot and the first start of each node program (cold compile cache)
// cost minutes. The files come in groups that run at once, one vCPU each; a group's files one after
// another.
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

/** Whether `file` (absolute) is one of those `files` names (relative to the repository). */
function inEntry(file: string, files: VmTestFiles): boolean {
  return matchesGlob(file, join(REPO, pathOf(files)));
}

/** The counts of the files `files` names, summed. */
function countsOf(run: Readonly<Record<string, TestCounts>>, files: VmTestFiles): TestCounts {
  const sum: TestCounts = { pass: 0, fail: 0, skipped: 0, todo: 0 };
  for (const [file, counts] of Object.entries(run)) {
    if (!inEntry(file, files)) continue;
    sum.pass += counts.pass;
    sum.fail += counts.fail;
    sum.skipped += counts.skipped;
    sum.todo += counts.todo;
  }
  return sum;
}

/**
 * Registers the test that runs `groups` in one VM boot: the groups at once, the entries of each one
 * after another. `budgetMs` per entry is how long it may take there alone (each ~10-15× as long as
 * on the host, harness/emulation.ts): the deadline of the run is their sum plus a boot, and bounds a
 * hang (two groups at once, each at worst at half the speed, take no longer than their sum).
 */
export function testFilesInVm(what: string, groups: readonly (readonly VmTestFiles[])[]): void {
  const modes = modesForVm();
  const only = process.env[ONLY_ENV];
  const chosenGroups = groups
    .map((group) =>
      group
        .filter((f) => f.kind === 'vm-only' || modes.length > 0)
        .filter((f) => only === undefined || matchesGlob(only, pathOf(f))),
    )
    .filter((group) => group.length > 0);
  const chosen = chosenGroups.flat();
  const deadlineMs = BOOT_MS + chosen.reduce((sum, f) => sum + f.budgetMs, 0);
  test(`${what}: inside the qemu VM${modes.length ? ` (${modes.join(', ')})` : ''}`, {
    timeout: deadlineMs + 60_000,
  }, async (t) => {
    if (!requireRoot(t, 'booting the qemu VM (qemu, apt)')) return;
    const files = only === undefined ? chosenGroups.map((group) => group.map(pathOf)) : [[only]];
    const run = await runNodeTestsInVm(files, { modes, timeoutMs: deadlineMs });
    t.diagnostic(`the VM run took ${Math.round(run.durationMs / 1000)} s, boot included`);
    for (const [i, group] of chosenGroups.entries()) {
      const reports = Object.entries(run.files).filter(([file]) => group.some((f) => inEntry(file, f)));
      const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
      t.diagnostic(`group ${i + 1}: ${seconds(reports.reduce((sum, [, r]) => sum + r.wallMs, 0))} in the VM`);
      for (const [file, report] of reports)
        t.diagnostic(`  ${relative(REPO, file)}: ${seconds(report.wallMs)}`);
    }
    assert.equal(run.exitCode, 0, `the tests failed in the VM (exit ${run.exitCode}):\n${run.output}`);
    for (const entry of chosen) {
      const counts = countsOf(run.files, entry);
      const where = `${pathOf(entry)} in the VM: ${JSON.stringify(counts)}\n${run.output}`;
      assert.equal(counts.fail, 0, where);
      // A todo test (a known bug pinned) counts as run.
      const ran = counts.pass + counts.todo;
      if (entry.kind === 'per-mode') assert.equal(ran, entry.testsPerMode * modes.length, where);
      // One file of the glob alone (ONLY_ENV) runs some of its tests.
      else assert.ok(ran >= (only === undefined ? entry.atLeast : 1), where);
    }
  });
}
