// externalTrafficPolicy, seen from an external client: Cluster hides the client's address and
// every node answers; Local keeps it and only nodes with a local endpoint answer, which the
// health check node port tells a load balancer.
import { ECHO_TCP_PORT, type LabDriver, type LabNode, type LabPod, type Outcome } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { describeTally, type Scenario, type ScenarioRun, tallyBackends } from './scenario.ts';

const ATTEMPTS = 8;

function sources(outcomes: readonly Outcome[]): string[] {
  return [...new Set(outcomes.flatMap((o) => ('sourceIp' in o ? [o.sourceIp] : [])))].sort();
}

/** The backends all sit on the first node, so the other nodes have none of their own. */
function backendNode(lab: LabDriver): { node: LabNode; local: LabPod[]; others: LabNode[] } {
  const [node, ...others] = lab.nodes();
  if (!node || others.length === 0) throw new Error('externalTrafficPolicy needs at least two nodes');
  const local = lab.pods().filter((p) => p.node === node.name);
  if (local.length === 0) throw new Error(`no test pod on ${node.name}`);
  return { node, local, others };
}

export const externalPolicyCluster: Scenario = {
  name: 'etp-cluster',
  title: 'externalTrafficPolicy Cluster: every node answers, with the client address masqueraded',
  async run(run) {
    const { local } = backendNode(run.lab);
    const nodePort = 30120;
    const service = labService({
      name: 'lab-etp-cluster',
      clusterIP: '10.96.100.12',
      type: 'NodePort',
      externalTrafficPolicy: 'Cluster',
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort,
    });
    await run.apply(
      service,
      labSlice(
        service,
        local.map((pod) => ({ pod })),
      ),
    );
    for (const node of run.lab.nodes()) {
      const probe = () =>
        run.lab.connect({ kind: 'external' }, 'tcp', node.address, nodePort, {
          count: ATTEMPTS,
          timeoutMs: 2000,
        });
      let outcomes: Outcome[] = [];
      const converged = await run.converge(
        `${node.name} answers`,
        async () => (outcomes = await probe()),
        (o) => o.every((x) => 'backend' in x),
        (o) => describeTally(tallyBackends(o)),
      );
      if (!converged) continue;
      const seen = tallyBackends(outcomes);
      run.check(
        `${node.name}: answered by the service's backends (all on ${local[0]!.node})`,
        [...seen.keys()].every((k) => local.some((p) => p.name === k)),
        describeTally(seen),
      );
      const seenSources = sources(outcomes);
      run.check(
        `${node.name}: the backend saw a cluster address, not the client's ${run.lab.externalAddress}`,
        seenSources.length > 0 && !seenSources.includes(run.lab.externalAddress),
        `source addresses seen: ${seenSources.join(', ') || 'none'}`,
      );
    }
  },
};

export const externalPolicyLocal: Scenario = {
  name: 'etp-local',
  title:
    'externalTrafficPolicy Local: the client address is kept, only nodes with a local endpoint answer, the health check node port says which',
  async run(run) {
    const { node, local, others } = backendNode(run.lab);
    const nodePort = 30121;
    const healthPort = 32121;
    const service = labService({
      name: 'lab-etp-local',
      clusterIP: '10.96.100.13',
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Local',
      healthCheckNodePort: healthPort,
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort,
    });
    await run.apply(
      service,
      labSlice(
        service,
        local.map((pod) => ({ pod })),
      ),
    );
    let outcomes: Outcome[] = [];
    const converged = await run.converge(
      `${node.name} (with local endpoints) answers`,
      async () =>
        (outcomes = await run.lab.connect({ kind: 'external' }, 'tcp', node.address, nodePort, {
          count: ATTEMPTS,
          timeoutMs: 2000,
        })),
      (o) => o.every((x) => 'backend' in x),
      (o) => describeTally(tallyBackends(o)),
    );
    if (converged) {
      const seen = tallyBackends(outcomes);
      run.check(
        `${node.name}: only its local backends answer`,
        [...seen.keys()].every((k) => local.some((p) => p.name === k)),
        describeTally(seen),
      );
      const seenSources = sources(outcomes);
      run.check(
        `${node.name}: the backend saw the client's own address ${run.lab.externalAddress}`,
        seenSources.length === 1 && seenSources[0] === run.lab.externalAddress,
        `source addresses seen: ${seenSources.join(', ') || 'none'}`,
      );
    }
    await healthCheck(run, node, healthPort, 200, local.length);
    for (const other of others) {
      // 503 first: it shows this node's kproxy has the service, so silence below is its doing.
      if (!(await healthCheck(run, other, healthPort, 503, 0))) continue;
      const seen = tallyBackends(
        await run.lab.connect({ kind: 'external' }, 'tcp', other.address, nodePort, {
          count: 3,
          timeoutMs: 1000,
        }),
      );
      run.check(
        `${other.name} (no local endpoint): nothing answers`,
        [...seen.keys()].every((k) => k.startsWith('error:')),
        describeTally(seen),
      );
    }
  },
};

/** Waits until the node's health check node port answers `status` with `endpoints` local endpoints. */
function healthCheck(
  run: ScenarioRun,
  node: LabNode,
  port: number,
  status: number,
  endpoints: number,
): Promise<boolean> {
  return run.converge(
    `${node.name}: health check node port answers ${status} with ${endpoints} local endpoints`,
    () => run.lab.httpGet({ kind: 'external' }, `http://${node.address}:${port}/`),
    (answer) => answer.status === status && localEndpoints(answer.body) === endpoints,
    (answer) => `HTTP ${answer.status} ${answer.body.trim()}`,
  );
}

/** kube-proxy's health check body: {"service":{...},"localEndpoints":N,...}. */
function localEndpoints(body: string): number | undefined {
  try {
    const value = (JSON.parse(body) as { localEndpoints?: unknown }).localEndpoints;
    return typeof value === 'number' ? value : undefined;
  } catch {
    return undefined;
  }
}
