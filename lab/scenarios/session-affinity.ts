import { ECHO_TCP_PORT, type Place } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, placeName, tallyFrom } from './probe.ts';
import { describeTally, type Scenario } from './scenario.ts';

const CLUSTER_IP = '10.96.100.14';
const NODE_PORT = 30140;
/** With four backends, 20 connections landing on one by chance is ~1e-11. */
const ATTEMPTS = 20;

export const clientIpAffinity: Scenario = {
  name: 'session-affinity',
  title: 'ClientIP session affinity: every connection from one client reaches the same backend',
  async run(run) {
    const pods = run.lab.pods();
    const service = labService({
      name: 'lab-affinity',
      clusterIP: CLUSTER_IP,
      type: 'NodePort',
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort: NODE_PORT,
      clientIPAffinity: true,
    });
    await run.apply(
      service,
      labSlice(
        service,
        pods.map((pod) => ({ pod })),
      ),
    );
    const [firstNode] = run.lab.nodes();
    const probes: { place: Place; host: string; port: number }[] = [
      ...run.lab
        .nodes()
        .map((n) => ({ place: { kind: 'node', node: n.name } as Place, host: CLUSTER_IP, port: 80 })),
      { place: { kind: 'external' }, host: firstNode!.address, port: NODE_PORT },
    ];
    for (const { place, host, port } of probes) {
      let seen = new Map<string, number>();
      const converged = await run.converge(
        `${host}:${port} answers ${placeName(place)}`,
        async () => (seen = await tallyFrom(run, place, 'tcp', host, port, 2, PROBE_TIMEOUT_MS)),
        (s) => [...s.keys()].some((k) => !k.startsWith('error:')),
        describeTally,
      );
      if (!converged) continue;
      seen = await tallyFrom(run, place, 'tcp', host, port, ATTEMPTS);
      run.check(
        `${placeName(place)} → ${host}:${port}: ${ATTEMPTS} connections, one backend`,
        seen.size === 1 && ![...seen.keys()][0]!.startsWith('error:'),
        describeTally(seen),
      );
    }
  },
};
