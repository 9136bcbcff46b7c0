// Golden files: the exact rendered plans for the nftables engineer's hand-built states, plus one
// incremental plan. UPDATE_GOLDEN=1 rewrites them (look at the diff by eye before committing).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { endpoint, ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';
import { goldenStates } from '../nftables/golden-states.ts';

const GOLDEN_DIR = join(import.meta.dirname, '../../golden/ipvs');

function checkGolden(name: string, actual: string): void {
  const file = join(GOLDEN_DIR, `${name}.txt`);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  assert.equal(actual, readFileSync(file, 'utf8'), `${file} differs (UPDATE_GOLDEN=1 to rewrite)`);
}

for (const [name, state] of Object.entries(goldenStates)) {
  test(`golden: ${name}`, () => checkGolden(name, ipvsPlanner.render(ipvsPlanner.planFull(state))));
}

test('golden: incremental (endpoint drained, service added, node port removed)', () => {
  const pods = [endpoint('10.244.2.10'), localEndpoint('10.244.1.10')];
  const web = servicePort('web', { clusterIP: '10.96.0.10', nodePort: 30010, clusterEndpoints: pods });
  const prev = ipv4([web]);
  const next = ipv4([
    { ...web, nodePort: 0, clusterEndpoints: [pods[1]!], localEndpoints: [pods[1]!] },
    servicePort('dns', { clusterIP: '10.96.0.53', protocol: 'UDP', port: 53, clusterEndpoints: [pods[0]!] }),
  ]);
  checkGolden('incremental', ipvsPlanner.render(ipvsPlanner.planIncremental(prev, next)));
});
