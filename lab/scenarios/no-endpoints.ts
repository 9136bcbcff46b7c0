import { ECHO_TCP_PORT, type Place } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, placeName, tallyFrom } from './probe.ts';
import { describeTally, type Scenario, sameBackends } from './scenario.ts';

const CLUSTER_IP = '10.96.100.15';
const NODE_PORT = 30150;
/** Long enough that a dropped SYN shows as "timeout", not as a refusal. */
const TIMEOUT_MS = 3000;

const refusedOnly = (seen: ReadonlyMap<string, number>) => seen.size === 1 && seen.has('error:ECONNREFUSED');

export const noEndpointReject: Scenario = {
  name: 'no-endpoint-reject',
  title:
    'a service without endpoints is refused at once (ECONNREFUSED, not a timeout), and served once it has one',
  async run(run) {
    const [client, backend] = run.lab.pods();
    const service = labService({
      name: 'lab-no-endpoints',
      clusterIP: CLUSTER_IP,
      type: 'NodePort',
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort: NODE_PORT,
    });
    await run.apply(service, labSlice(service, []));
    const fromPod: Place = { kind: 'pod', pod: client!.name };
    const converged = await run.converge(
      'the ClusterIP refuses',
      () => tallyFrom(run, fromPod, 'tcp', CLUSTER_IP, 80, 1, PROBE_TIMEOUT_MS),
      refusedOnly,
      describeTally,
    );
    if (!converged) return;
    const targets: { place: Place; host: string; port: number }[] = [
      { place: fromPod, host: CLUSTER_IP, port: 80 },
      ...run.lab
        .nodes()
        .map((n) => ({ place: { kind: 'external' } as Place, host: n.address, port: NODE_PORT })),
    ];
    for (const { place, host, port } of targets) {
      const seen = await tallyFrom(run, place, 'tcp', host, port, 3, TIMEOUT_MS);
      run.check(`${placeName(place)} → ${host}:${port}: refused`, refusedOnly(seen), describeTally(seen));
    }
    await run.apply(labSlice(service, [{ pod: backend! }]));
    await run.converge(
      'served once an endpoint exists',
      () => tallyFrom(run, fromPod, 'tcp', CLUSTER_IP, 80, 2, PROBE_TIMEOUT_MS),
      (seen) => sameBackends(seen, [backend!]),
      describeTally,
    );
  },
};
