// `kproxy trace` of IPVS ClientIP affinity: the companion table's steer and record chains as the
// tracer evaluates them, on a render with remembered clients added (as `--live` reads them back
// from the kernel's `affinity-clients` set).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { parseIpvsRuleset, traceIpvs } from '../../../dataplanes/ipvs/trace.ts';
import { outcomeShares } from '../../../dataplanes/shared/trace/report.ts';
import { endpoint, ipv4, localEndpoint, servicePort } from '../../../harness/proxy-states.ts';

const CLIENT = '10.100.0.200';
const state = ipv4([
  servicePort('sticky', {
    clusterIP: '10.96.0.30',
    sessionAffinity: { timeoutSeconds: 600 },
    clusterEndpoints: [endpoint('10.244.2.10'), localEndpoint('10.244.1.10')],
  }),
]);

/** Where a new connection of CLIENT to the sticky service goes, with `remembered` real servers. */
function trace(remembered: readonly string[]): { endpoint?: string; share: number; affinity?: string }[] {
  const elements = remembered.map((rs) => `${CLIENT} . 10.96.0.30 . tcp . 80 . ${rs}`).join(', ');
  const rendered = ipvsPlanner.render(ipvsPlanner.planFull(state));
  const text = remembered.length
    ? `${rendered}add element ip kproxy-ipvs affinity-clients { ${elements} }\n`
    : rendered;
  const packet = {
    protocol: 'tcp',
    source: CLIENT,
    sourcePort: 40000,
    destination: '10.96.0.30',
    port: 80,
    via: 'external',
  } as const;
  const report = traceIpvs(parseIpvsRuleset(text), packet, { localAddresses: ['10.100.0.11'] });
  return outcomeShares(report).map((o) => ({
    ...(o.outcome.kind === 'dnat' && { endpoint: o.outcome.endpoint, affinity: o.outcome.affinity }),
    share: o.probability,
  }));
}

test('a new client: IPVS schedules (no persistence), the companion remembers its server for the timeout', () => {
  const outcomes = trace([]);
  assert.deepEqual(outcomes.map((o) => [o.endpoint, o.share]).sort(), [
    ['10.244.1.10:8080', 0.5],
    ['10.244.2.10:8080', 0.5],
  ]);
  for (const o of outcomes)
    assert.match(o.affinity ?? '', /@affinity-clients remembers 10\.100\.0\.200 for 600s/);
});

test('a remembered client is steered to its server; one remembered with a server now gone is re-balanced', () => {
  assert.deepEqual(
    trace(['10.244.1.10']).map((o) => [o.endpoint, o.share]),
    [['10.244.1.10:8080', 1]],
  );
  assert.equal(trace(['10.244.9.9']).length, 2, 'a server not in the maps is never steered to');
});
