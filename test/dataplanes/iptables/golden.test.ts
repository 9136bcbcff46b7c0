// Golden files: the exact restore input for each scenario (UPDATE_GOLDEN=1 rewrites them).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { iptablesPlanner } from '../../../dataplanes/iptables/planner.ts';
import { main } from '../../../src/cli/main.ts';
import { captureIO } from '../../cli/capture-io.ts';
import { SCENARIOS } from './scenarios.ts';

const GOLDEN_DIR = join(import.meta.dirname, '../../golden/iptables');

function checkGolden(name: string, actual: string): void {
  const file = join(GOLDEN_DIR, `${name}.rules`);
  if (process.env.UPDATE_GOLDEN === '1') {
    writeFileSync(file, actual);
    return;
  }
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs (UPDATE_GOLDEN=1 rewrites it)`);
}

for (const [name, state] of Object.entries(SCENARIOS)) {
  test(`full restore input for ${name} matches its golden file`, () => {
    checkGolden(name, iptablesPlanner.render(iptablesPlanner.planFull(state)));
  });
}

test('incremental restore input for an endpoint change matches its golden file', () => {
  const before = SCENARIOS['cluster-ip']!;
  const web = before.IPv4!.servicePorts.get('ns1/web:80/TCP')!;
  const after = {
    IPv4: {
      ...before.IPv4!,
      servicePorts: new Map(before.IPv4!.servicePorts).set(web.key, {
        ...web,
        clusterEndpoints: [...web.clusterEndpoints].slice(0, 2),
      }),
    },
  };
  checkGolden(
    'cluster-ip.since-endpoint-removed',
    iptablesPlanner.render(iptablesPlanner.planIncremental(before, after)),
  );
});

test('the bundled example cluster through the whole pipeline (kproxy render --mode iptables --example)', async () => {
  const captured = captureIO();
  const code = await main(['render', '--mode', 'iptables', '--example'], captured.io);
  assert.equal(code, 0, captured.stderr());
  checkGolden('example-cluster', captured.stdout());
});
