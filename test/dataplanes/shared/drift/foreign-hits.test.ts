// Which foreign rules drop a Service's packets (foreign-hits.ts): every address of every port traced
// from outside and from the node, the foreign rule that ended a path named with the ports it hits;
// and the traces give way to the event loop, as the daemon's /healthz needs during a comparison of
// 30,000 Services (60,000 traces).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import type { ServicePort } from '../../../../contract/proxy-state.ts';
import { foreignHits } from '../../../../dataplanes/shared/drift/foreign-hits.ts';
import type { TraceReport, TraceStep } from '../../../../dataplanes/shared/trace/outcome.ts';
import type { TracePacket } from '../../../../dataplanes/shared/trace/packet.ts';
import { ipv4, servicePort } from '../../../../harness/proxy-states.ts';

const DROP: TraceStep = {
  hook: 'input',
  table: 'ip guard',
  chain: 'in',
  kind: 'rule',
  text: 'ip daddr 10.96.0.2 drop',
};

/** A trace that drops packets to 10.96.0.2 at DROP and lets the others through, busy for `busyMs`. */
function trace(busyMs: number) {
  const traced: TracePacket[] = [];
  const run = (packet: TracePacket): TraceReport => {
    traced.push(packet);
    for (const end = performance.now() + busyMs; performance.now() < end; );
    const dropped = packet.destination === '10.96.0.2';
    return {
      mode: 'nftables',
      packet,
      notEvaluated: [],
      branches: [
        {
          probability: 1,
          steps: dropped ? [DROP] : [],
          outcome: dropped ? { kind: 'drop' } : { kind: 'accept-local' },
        },
      ],
    } as unknown as TraceReport;
  };
  return { traced, run };
}

function ports(count: number): ServicePort[] {
  const state = ipv4(
    Array.from({ length: count }, (_, i) =>
      servicePort(`svc${i}`, {
        clusterIP: `10.96.${i >> 8}.${i & 255}`,
        externalIPs: i === 2 ? ['192.0.2.77'] : [],
      }),
    ),
  );
  return [...state.IPv4!.servicePorts.values()];
}

test('a foreign rule that ends a path is named with the Service ports it drops, from outside and the node', async () => {
  const { traced, run } = trace(0);
  const hits = await foreignHits(
    ports(4),
    ['10.100.0.11'],
    run,
    () => true,
    (step) => step.text,
  );
  assert.deepEqual(
    [...hits].map(([key, services]) => [key, [...services]]),
    [['ip daddr 10.96.0.2 drop', [ports(4)[2]!.key]]],
  );
  // Each address (svc2's external IP too) from outside and from the node's own address.
  assert.equal(traced.length, 2 * 5);
  assert.deepEqual(
    traced.filter((p) => p.destination === '10.96.0.2').map((p) => [p.via, p.source]),
    [
      ['external', '192.0.2.1'],
      ['node', '10.100.0.11'],
    ],
  );
});

test("a rule that is not the mode's foreign one is not named", async () => {
  const { run } = trace(0);
  assert.equal(
    (
      await foreignHits(
        ports(4),
        [],
        run,
        () => false,
        (step) => step.text,
      )
    ).size,
    0,
  );
});

test('the traces give way to the event loop', async () => {
  // 200 ports × 2 traces of ~1 ms: ~400 ms of work, given way every slice (10 ms of the clock),
  // so dozens of turns of the loop; run straight through it would give none until it ended.
  const { run } = trace(1);
  let turns = 0;
  let done = false;
  const ticking = (async () => {
    while (!done) {
      await setImmediate();
      turns++;
    }
  })();
  await foreignHits(
    ports(200),
    [],
    run,
    () => true,
    (step) => step.text,
  );
  done = true;
  await ticking;
  assert.ok(turns > 10, `the loop turned ${turns} times during ~400 ms of traces`);
});
