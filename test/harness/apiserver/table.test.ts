// Server-side printing cells that kubectl.test.ts does not reach: ages past two minutes, and the
// External-IP and Status columns of the less common Service types and Node states.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredObject } from '../../../harness/apiserver/state.ts';
import { humanDuration, toTable, wantsTable } from '../../../harness/apiserver/table.ts';
import { NODES, SERVICES } from '../../../src/kube/resources.ts';

const cells = (resource: typeof SERVICES, object: unknown) =>
  (toTable(resource, [object as StoredObject], {}, 'None', 0) as { rows: { cells: unknown[] }[] }).rows[0]!
    .cells;

test('ages read as kubectl shows them (apimachinery HumanDuration)', () => {
  const m = 60;
  const h = 60 * m;
  const d = 24 * h;
  assert.deepEqual(
    [
      5,
      119,
      2 * m + 5,
      10 * m,
      179 * m,
      3 * h + 5 * m,
      8 * h,
      2 * d + 3 * h,
      30 * d,
      3 * 365 * d + 2 * d,
      9 * 365 * d,
    ].map(humanDuration),
    ['5s', '119s', '2m5s', '10m', '179m', '3h5m', '8h', '2d3h', '30d', '3y2d', '9y'],
  );
});

test('External-IP: a LoadBalancer without ingress is <pending>; ExternalName shows its name; NodePort ports show both', () => {
  const meta = { name: 's', resourceVersion: '1', uid: 'u', creationTimestamp: '1970-01-01T00:00:00Z' };
  assert.equal(cells(SERVICES, { metadata: meta, spec: { type: 'LoadBalancer' } })[3], '<pending>');
  assert.equal(
    cells(SERVICES, {
      metadata: meta,
      spec: { type: 'LoadBalancer', externalIPs: ['192.0.2.5'] },
      status: { loadBalancer: { ingress: [{ ip: '203.0.113.1' }] } },
    })[3],
    '203.0.113.1,192.0.2.5',
  );
  assert.equal(
    cells(SERVICES, { metadata: meta, spec: { type: 'ExternalName', externalName: 'db.example' } })[3],
    'db.example',
  );
  const nodePort = cells(SERVICES, {
    metadata: meta,
    spec: {
      type: 'NodePort',
      clusterIP: '10.96.0.1',
      ports: [
        { port: 80, nodePort: 30080, protocol: 'TCP' },
        { port: 53, protocol: 'UDP' },
      ],
    },
  });
  assert.deepEqual(nodePort.slice(1, 6), ['NodePort', '10.96.0.1', '<none>', '80:30080/TCP,53/UDP', '0s']);
});

test('Node Status and Roles: NotReady, cordoned, roles from node-role labels', () => {
  const node = {
    metadata: {
      name: 'n',
      resourceVersion: '1',
      uid: 'u',
      labels: { 'node-role.kubernetes.io/control-plane': '' },
    },
    spec: { unschedulable: true },
    status: { conditions: [{ type: 'Ready', status: 'False' }] },
  };
  assert.deepEqual(cells(NODES, node).slice(1, 4), [
    'NotReady,SchedulingDisabled',
    'control-plane',
    '<unknown>',
  ]);
});

test('a Table only when asked for meta.k8s.io/v1 as=Table', () => {
  assert.equal(wantsTable('application/json;as=Table;v=v1;g=meta.k8s.io,application/json'), true);
  assert.equal(wantsTable('application/json;as=Table;v=v1beta1;g=meta.k8s.io'), false);
  assert.equal(wantsTable('application/json'), false);
  assert.equal(wantsTable(undefined), false);
});
