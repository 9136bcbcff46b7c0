import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LabPod } from '../../../lab/driver.ts';
import { labService, labSlice } from '../../../lab/scenarios/objects.ts';
import { decodeObject } from '../../../src/kube/decode.ts';

const pod = (name: string, node: string, address: string): LabPod => ({ name, node, address });

describe('lab objects', () => {
  test('every kind of lab Service decodes as a valid object, keeping what the scenario asked for', () => {
    const services = [
      labService({ name: 'a', clusterIP: '10.96.100.1', port: 80, targetPort: 8080 }),
      labService({
        name: 'b',
        clusterIP: '10.96.100.2',
        type: 'LoadBalancer',
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 32121,
        port: 80,
        targetPort: 8080,
        nodePort: 30121,
      }),
      labService({
        name: 'c',
        clusterIP: '10.96.100.3',
        protocol: 'UDP',
        type: 'NodePort',
        port: 53,
        targetPort: 8053,
        nodePort: 30160,
        clientIPAffinity: true,
      }),
    ];
    for (const service of services) {
      const decoded = decodeObject(service);
      assert.equal(decoded.kind, 'object', JSON.stringify(decoded));
    }
    const local = decodeObject(services[1]);
    assert.equal(local.kind, 'object');
    assert.match(JSON.stringify(local.object), /"externalTrafficPolicy":"Local"/);
    assert.match(JSON.stringify(local.object), /"healthCheckNodePort":32121/);
    assert.match(JSON.stringify(decodeObject(services[2])), /"sessionAffinity":"ClientIP"/);
  });

  test("a lab slice belongs to its service, serves the target port, and keeps each endpoint's node and readiness", () => {
    const service = labService({ name: 'web', clusterIP: '10.96.100.1', port: 80, targetPort: 8080 });
    const slice = labSlice(service, [
      { pod: pod('p0', 'node-0', '10.244.1.10') },
      { pod: pod('p1', 'node-1', '10.244.2.10'), ready: false },
    ]);
    const decoded = decodeObject(slice);
    assert.equal(decoded.kind, 'object', JSON.stringify(decoded));
    assert.equal(slice.metadata.labels?.['kubernetes.io/service-name'], 'web');
    // A real cluster's endpoint controller must leave the slice alone.
    assert.notEqual(
      slice.metadata.labels?.['endpointslice.kubernetes.io/managed-by'],
      'endpointslice-controller.k8s.io',
    );
    assert.deepEqual(slice.ports, [{ name: 'p', protocol: 'TCP', port: 8080 }]);
    assert.deepEqual(
      (slice.endpoints as { addresses: string[]; nodeName: string; conditions: { ready: boolean } }[]).map(
        (e) => [e.addresses[0], e.nodeName, e.conditions.ready],
      ),
      [
        ['10.244.1.10', 'node-0', true],
        ['10.244.2.10', 'node-1', false],
      ],
    );
  });
});
