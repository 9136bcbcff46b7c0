import { ECHO_TCP_PORT, type Place } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, placeName, tallyFrom } from './probe.ts';
import { attemptsFor, describeTally, type Scenario, sameBackends } from './scenario.ts';

const CLUSTER_IP = '10.96.100.10';

export const clusterIpDnat: Scenario = {
  name: 'clusterip-dnat',
  title:
    'ClusterIP DNAT reaches every ready backend and never a not-ready one, from a pod and from every node',
  async run(run) {
    const pods = run.lab.pods();
    const notReady = pods.at(-1)!;
    const ready = pods.slice(0, -1);
    const service = labService({
      name: 'lab-clusterip',
      clusterIP: CLUSTER_IP,
      port: 80,
      targetPort: ECHO_TCP_PORT,
    });
    await run.apply(
      service,
      labSlice(service, [...ready.map((pod) => ({ pod })), { pod: notReady, ready: false }]),
    );
    const count = attemptsFor(ready.length);
    const places: Place[] = [
      { kind: 'pod', pod: notReady.name },
      ...run.lab.nodes().map((n): Place => ({ kind: 'node', node: n.name })),
    ];
    for (const place of places) {
      // Each place's node syncs on its own: wait for it before counting.
      const converged = await run.converge(
        `the ClusterIP answers ${placeName(place)}`,
        () => tallyFrom(run, place, 'tcp', CLUSTER_IP, 80, 2, PROBE_TIMEOUT_MS),
        (seen) => [...seen.keys()].some((k) => !k.startsWith('error:')),
        describeTally,
      );
      if (!converged) continue;
      const seen = await tallyFrom(run, place, 'tcp', CLUSTER_IP, 80, count);
      run.check(
        `from ${placeName(place)}: exactly the ${ready.length} ready backends answer (${count} connections)`,
        sameBackends(seen, ready),
        describeTally(seen),
      );
    }
  },
};
