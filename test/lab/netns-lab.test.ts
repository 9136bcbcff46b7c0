// The lab's scenario checks, with real packets, against the netns lab: two node namespaces each
// running `kproxy run`, four pods, an external client, the stand-in API server. Once per mode that
// runs on this kernel; the lab is torn down after each mode, also when a check fails. The modes this
// kernel cannot run (IPVS), test/in-vm.test.ts runs with this file inside the qemu VM.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { requireRoot } from '../../harness/netns.ts';
import { modesHere } from '../../harness/vm.ts';
import { NetnsLab } from '../../lab/netns-lab.ts';
import { formatFailure } from '../../lab/report.ts';
import { ALL_SCENARIOS } from '../../lab/scenarios/all.ts';
import { runScenario } from '../../lab/scenarios/scenario.ts';

const isRoot = process.getuid?.() === 0;

for (const mode of modesHere()) {
  describe(`netns lab (${mode})`, () => {
    let lab: NetnsLab | undefined;
    before(async () => {
      if (isRoot) lab = await NetnsLab.start({ mode, tag: `lab-${mode.slice(0, 3)}` });
    });
    after(() => lab?.destroy());

    for (const scenario of ALL_SCENARIOS) {
      test(scenario.title, async (t) => {
        if (!requireRoot(t, 'the netns lab creates network namespaces')) return;
        assert.ok(lab, 'the lab started');
        const result = await runScenario(lab, scenario);
        assert.ok(result.passed, formatFailure(result));
        assert.ok(result.checks.length > 0, 'the scenario checked something');
      });
    }
  });
}
