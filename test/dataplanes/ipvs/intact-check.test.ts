import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RealServerTurns } from '../../../dataplanes/ipvs/intact-check.ts';
import { ipvsDesired } from '../../../dataplanes/ipvs/planner.ts';
import { endpoint, ipv4, servicePort } from '../../../harness/proxy-states.ts';

test("turns list every virtual server's real servers within (virtual servers / budget) checks, again and again", () => {
  const ports = Array.from({ length: 7 }, (_, i) =>
    servicePort(`svc-${i}`, {
      clusterIP: `10.96.0.${i + 1}`,
      clusterEndpoints: [endpoint(`10.244.0.${i + 1}`)],
    }),
  );
  const record = ipvsDesired(ipv4(ports), { scheduler: 'rr' });
  const turns = new RealServerTurns(3);
  const keys = (n: number) => Array.from({ length: n }, () => turns.next(record).map((s) => s.address));
  const [first, second, third, fourth] = keys(4);
  assert.deepEqual(first, ['10.96.0.1', '10.96.0.2', '10.96.0.3']);
  assert.deepEqual(second, ['10.96.0.4', '10.96.0.5', '10.96.0.6']);
  assert.deepEqual(third, ['10.96.0.7', '10.96.0.1', '10.96.0.2'], 'from the start again past the end');
  assert.deepEqual(fourth, ['10.96.0.3', '10.96.0.4', '10.96.0.5']);
});
