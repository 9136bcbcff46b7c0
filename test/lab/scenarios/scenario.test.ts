import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeJson, LabDriver } from '../../../lab/driver.ts';
import { labService, labSlice } from '../../../lab/scenarios/objects.ts';
import { runScenario, type Scenario, tallyBackends } from '../../../lab/scenarios/scenario.ts';

/** A lab that only records object writes; scenarios here never send traffic. */
function recordingLab() {
  const live = new Map<string, KubeJson>();
  const log: string[] = [];
  const key = (o: KubeJson) => `${o.kind}/${o.metadata.name}`;
  const lab = {
    name: 'recording',
    externalAddress: '192.0.2.1',
    nodes: () => [{ name: 'n0', address: '192.0.2.10' }],
    pods: () => [{ name: 'p0', node: 'n0', address: '10.244.0.10' }],
    async apply(object: KubeJson) {
      live.set(key(object), object);
      log.push(`apply ${key(object)}`);
    },
    async remove(object: KubeJson) {
      live.delete(key(object));
      log.push(`remove ${key(object)}`);
    },
  } as unknown as LabDriver;
  return { lab, live, log };
}

const service = labService({ name: 'web', clusterIP: '10.96.100.1', port: 80, targetPort: 8080 });

describe('running a scenario', () => {
  test('a lab failure fails the scenario with its message, and what it wrote is still deleted, slices first', async () => {
    const { lab, live, log } = recordingLab();
    const scenario: Scenario = {
      name: 'breaks',
      title: 'throws half-way',
      async run(run) {
        await run.apply(service, labSlice(service, [{ pod: lab.pods()[0]! }]));
        run.check('something', true, 'ok');
        throw new Error('ssh: connection refused');
      },
    };
    const result = await runScenario(lab, scenario);
    assert.equal(result.passed, false);
    assert.equal(result.error, 'ssh: connection refused');
    assert.equal(live.size, 0, 'nothing left behind');
    assert.deepEqual(log.slice(-2), ['remove EndpointSlice/web-lab', 'remove Service/web']);
  });

  test('a scenario passes only when it checked something and every check passed', async () => {
    const { lab } = recordingLab();
    const silent: Scenario = { name: 'silent', title: 'checks nothing', run: async () => {} };
    assert.equal((await runScenario(lab, silent)).passed, false);
    const mixed: Scenario = {
      name: 'mixed',
      title: 'one bad check',
      async run(run) {
        run.check('good', true, 'ok');
        run.check('bad', false, 'node-0-pod-0×3');
      },
    };
    const result = await runScenario(lab, mixed);
    assert.equal(result.passed, false);
    assert.deepEqual(
      result.checks.filter((c) => !c.passed),
      [{ what: 'bad', passed: false, evidence: 'node-0-pod-0×3' }],
    );
  });

  test('converge records how long the nodes took, and fails with the last evidence when they never do', async () => {
    const { lab } = recordingLab();
    let probes = 0;
    const scenario: Scenario = {
      name: 'converges',
      title: 'third probe is right',
      async run(run) {
        await run.converge(
          'answers',
          async () => ++probes,
          (n) => n >= 3,
          (n) => `probe ${n}`,
        );
      },
    };
    const result = await runScenario(lab, scenario);
    assert.equal(result.passed, true);
    assert.equal(result.convergeMs.length, 1);
    assert.match(result.checks[0]!.evidence, /^after \d+ ms: probe 3$/);
  });
});

test('tallyBackends counts answers per backend and failures per error code, sorted', () => {
  const tally = tallyBackends([
    { backend: 'b', sourceIp: '10.0.0.1' },
    { error: 'timeout' },
    { backend: 'a', sourceIp: '10.0.0.1' },
    { backend: 'b', sourceIp: '10.0.0.1' },
  ]);
  assert.deepEqual(
    [...tally],
    [
      ['a', 1],
      ['b', 2],
      ['error:timeout', 1],
    ],
  );
});
