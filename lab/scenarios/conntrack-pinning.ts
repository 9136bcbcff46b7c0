// An established connection keeps its backend (conntrack) while the service's endpoints change and
// while every kproxy restarts and resyncs in full; it dies only when its own backend goes away.
import { ECHO_TCP_PORT, type LabPod } from '../driver.ts';
import { labService, labSlice } from './objects.ts';
import { PROBE_TIMEOUT_MS, tallyFrom } from './probe.ts';
import { describeTally, type Scenario, type ScenarioRun } from './scenario.ts';

const NODE_PORT = 30170;

export const conntrackPinning: Scenario = {
  name: 'conntrack-pinning',
  title:
    'an established connection keeps its backend through endpoint changes and proxy restarts, and dies only with its backend',
  async run(run) {
    const [first, second, spare] = run.lab.pods();
    if (!first || !second || !spare) throw new Error('conntrack pinning needs three pods');
    const [node] = run.lab.nodes();
    const service = labService({
      name: 'lab-pinning',
      clusterIP: '10.96.100.17',
      type: 'NodePort',
      port: 80,
      targetPort: ECHO_TCP_PORT,
      nodePort: NODE_PORT,
    });
    const serve = (pods: readonly LabPod[]) =>
      run.apply(
        labSlice(
          service,
          pods.map((pod) => ({ pod })),
        ),
      );
    await run.apply(service);
    await serve([first, second]);
    const newConnections = () =>
      tallyFrom(run, { kind: 'external' }, 'tcp', node!.address, NODE_PORT, 8, PROBE_TIMEOUT_MS);
    const answered = await run.converge(
      'the service answers',
      newConnections,
      (seen) => [...seen.keys()].some((k) => !k.startsWith('error:')),
      describeTally,
    );
    if (!answered) return;

    const held = await run.lab.hold({ kind: 'external' }, node!.address, NODE_PORT);
    try {
      const pinned = [first, second].find((p) => p.name === held.backend);
      if (pinned === undefined) {
        run.check('the held connection reaches a backend of the service', false, held.backend);
        return;
      }
      const other = pinned === first ? second : first;
      const stillAlive = async (after: string) =>
        run.check(
          `held connection to ${pinned.name} still echoes after ${after}`,
          await held.alive(),
          `backend ${held.backend}`,
        );

      await serve([first, second, spare]);
      await run.converge(
        'a new endpoint gets new connections',
        newConnections,
        (s) => s.has(spare.name),
        describeTally,
      );
      await stillAlive(`${spare.name} was added`);

      await serve([pinned, spare]);
      await converged(run, `${other.name} removed`, newConnections, [pinned, spare]);
      await stillAlive(`${other.name} was removed`);

      await run.lab.restartProxies();
      await stillAlive('every kproxy restarted and synced in full');

      // Its endpoint gone but the pod alive: conntrack keeps the flow, as with kube-proxy.
      await serve([spare]);
      await converged(run, `${pinned.name} removed`, newConnections, [spare]);
      await stillAlive(`its own endpoint was removed (the pod still runs)`);

      await run.lab.restartBackend(pinned.name);
      run.check(
        `held connection dies once its backend ${pinned.name} goes away`,
        !(await held.alive()),
        `backend ${held.backend}`,
      );
    } finally {
      await held.close();
    }
  },
};

/** Waits until new connections reach exactly `expected`. */
async function converged(
  run: ScenarioRun,
  what: string,
  probe: () => Promise<Map<string, number>>,
  expected: readonly LabPod[],
): Promise<boolean> {
  return run.converge(
    `new connections follow: ${what}`,
    probe,
    (seen) => [...seen.keys()].every((k) => expected.some((p) => p.name === k)),
    describeTally,
  );
}
