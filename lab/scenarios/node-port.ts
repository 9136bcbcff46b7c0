import { ECHO_TCP_PORT } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, tallyFrom } from './probe.ts';
import { attemptsFor, describeTally, type Scenario, sameBackends } from './scenario.ts';

const NODE_PORT = 30110;

export const nodePortDnat: Scenario = {
  name: 'nodeport-dnat',
  title: 'a NodePort on every node reaches every ready backend from an external client',
  async run(run) {
    const pods = run.lab.pods();
    const service = labService({
      name: 'lab-nodeport',
      clusterIP: '10.96.100.11',
      type: 'NodePort',
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort: NODE_PORT,
    });
    await run.apply(
      service,
      labSlice(
        service,
        pods.map((pod) => ({ pod })),
      ),
    );
    const count = attemptsFor(pods.length);
    for (const node of run.lab.nodes()) {
      const converged = await run.converge(
        `the node port of ${node.name} answers`,
        () => tallyFrom(run, { kind: 'external' }, 'tcp', node.address, NODE_PORT, 2, PROBE_TIMEOUT_MS),
        (seen) => [...seen.keys()].some((k) => !k.startsWith('error:')),
        describeTally,
      );
      if (!converged) continue;
      const seen = await tallyFrom(run, { kind: 'external' }, 'tcp', node.address, NODE_PORT, count);
      run.check(
        `${node.name}:${NODE_PORT} from outside: all ${pods.length} backends answer (${count} connections)`,
        sameBackends(seen, pods),
        describeTally(seen),
      );
    }
  },
};
