import { ECHO_UDP_PORT, type Place } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, placeName, tallyFrom } from './probe.ts';
import { attemptsFor, describeTally, type Scenario, sameBackends } from './scenario.ts';

const CLUSTER_IP = '10.96.100.16';
const NODE_PORT = 30160;

export const udpDnat: Scenario = {
  name: 'udp',
  title: 'UDP: ClusterIP and NodePort datagrams reach every backend, from a pod and from outside',
  async run(run) {
    const pods = run.lab.pods();
    const service = labService({
      name: 'lab-udp',
      clusterIP: CLUSTER_IP,
      protocol: 'UDP',
      type: 'NodePort',
      port: 53,
      targetPort: ECHO_UDP_PORT,
      nodePort: NODE_PORT,
    });
    const [client, ...backends] = pods;
    await run.apply(
      service,
      labSlice(
        service,
        backends.map((pod) => ({ pod })),
      ),
    );
    const targets: { place: Place; host: string; port: number }[] = [
      { place: { kind: 'pod', pod: client!.name }, host: CLUSTER_IP, port: 53 },
      ...run.lab
        .nodes()
        .map((n) => ({ place: { kind: 'external' } as Place, host: n.address, port: NODE_PORT })),
    ];
    const count = attemptsFor(backends.length);
    for (const { place, host, port } of targets) {
      const converged = await run.converge(
        `${host}:${port}/udp answers ${placeName(place)}`,
        () => tallyFrom(run, place, 'udp', host, port, 2, PROBE_TIMEOUT_MS),
        (seen) => [...seen.keys()].some((k) => !k.startsWith('error:')),
        describeTally,
      );
      if (!converged) continue;
      const seen = await tallyFrom(run, place, 'udp', host, port, count);
      run.check(
        `${placeName(place)} → ${host}:${port}/udp: all ${backends.length} backends answer (${count} datagrams)`,
        sameBackends(seen, backends),
        describeTally(seen),
      );
    }
  },
};
