// Golden files: the exact full scripts for hand-built states. UPDATE_GOLDEN=1 rewrites them
// (look at the diff by eye before committing).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { DualStackState } from '../../../contract/proxy-state.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { main } from '../../../src/cli/main.ts';
import { captureIO } from '../../cli/capture-io.ts';
import { goldenStates } from './golden-states.ts';

const GOLDEN_DIR = join(import.meta.dirname, '../../golden/nftables');

function checkGolden(name: string, state: DualStackState): void {
  checkGoldenText(name, nftablesPlanner.render(nftablesPlanner.planFull(state)));
}

function checkGoldenText(name: string, actual: string): void {
  const file = join(GOLDEN_DIR, `${name}.nft`);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs (UPDATE_GOLDEN=1 to rewrite)`);
}

for (const [name, state] of Object.entries(goldenStates)) {
  test(`golden: ${name}`, () => checkGolden(name, state));
}

test('golden: the bundled example cluster, through the whole pipeline (kproxy render --example)', async () => {
  const captured = captureIO();
  const code = await main(['render', '--mode', 'nftables', '--example'], captured.io);
  assert.equal(code, 0, captured.stderr());
  checkGoldenText('example-cluster', captured.stdout());
});
