// The stand-in API server's wire protocol, checked with plain HTTP (not kproxy's client), so that
// the informer tests rest on a server that behaves like kube-apiserver.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, test } from 'node:test';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../../harness/apiserver/sample-objects.ts';
import { startApiServer } from '../../../harness/apiserver/server.ts';
import { ENDPOINT_SLICES, NODES, SERVICE_CIDRS, SERVICES } from '../../../src/kube/resources.ts';

interface WatchLine {
  type: string;
  object: {
    kind?: string;
    code?: number;
    reason?: string;
    metadata: { name?: string; resourceVersion: string; annotations?: Record<string, string> };
  };
}

/** Opens a watch with node:http and collects event lines until `until` says stop. */
function watchLines(url: string, until: (lines: WatchLine[]) => boolean): Promise<WatchLine[]> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['transfer-encoding'], 'chunked');
      const lines: WatchLine[] = [];
      // We end the watch ourselves by destroying the request; the response then reports "aborted".
      res.on('error', () => {});
      const rl = createInterface({ input: res });
      rl.on('error', () => {});
      rl.on('line', (line) => {
        lines.push(JSON.parse(line));
        if (until(lines)) {
          req.destroy();
          resolve(lines);
        }
      });
      res.on('end', () => resolve(lines));
    });
    req.on('error', reject);
  });
}

describe('stand-in API server', async () => {
  const server = await startApiServer({ bookmarkIntervalMs: 50, historyLimit: 20 });
  after(() => server.stop());

  test('lists look like kube-apiserver lists: kind, apiVersion, resourceVersion, continue, remainingItemCount', async () => {
    for (const n of ['a', 'b', 'c']) server.state.apply(ENDPOINT_SLICES, sampleEndpointSlice('ns1', n));
    const res = await fetch(`${server.url}/apis/discovery.k8s.io/v1/namespaces/ns1/endpointslices?limit=2`);
    const body = (await res.json()) as {
      kind: string;
      apiVersion: string;
      metadata: { resourceVersion: string; continue: string; remainingItemCount: number };
      items: { kind?: string; metadata: { name: string; resourceVersion: string; uid: string } }[];
    };
    assert.equal(body.kind, 'EndpointSliceList');
    assert.equal(body.apiVersion, 'discovery.k8s.io/v1');
    assert.equal(body.metadata.remainingItemCount, 1);
    assert.ok(body.metadata.continue);
    assert.deepEqual(
      body.items.map((i) => i.metadata.name),
      ['a', 'b'],
    );
    assert.equal(body.items[0]?.kind, undefined, 'list items carry no kind, as from the real server');
    const rest = (await (
      await fetch(
        `${server.url}/apis/discovery.k8s.io/v1/namespaces/ns1/endpointslices?limit=2&continue=${body.metadata.continue}`,
      )
    ).json()) as { metadata: { continue?: string }; items: { metadata: { name: string } }[] };
    assert.deepEqual(
      rest.items.map((i) => i.metadata.name),
      ['c'],
    );
    assert.equal(rest.metadata.continue, undefined);
  });

  test('resourceVersions rise across resources; writes over HTTP are served like the real thing', async () => {
    const post = await fetch(`${server.url}/api/v1/namespaces/web/services`, {
      method: 'POST',
      body: JSON.stringify(sampleService('ignored', 'front')),
    });
    assert.equal(post.status, 201);
    const created = (await post.json()) as { metadata: { namespace: string; resourceVersion: string } };
    assert.equal(created.metadata.namespace, 'web', 'the namespace comes from the path');
    const dup = await fetch(`${server.url}/api/v1/namespaces/web/services`, {
      method: 'POST',
      body: JSON.stringify(sampleService('web', 'front')),
    });
    assert.equal(dup.status, 409);
    assert.equal(((await dup.json()) as { reason: string }).reason, 'AlreadyExists');
    const node = await fetch(`${server.url}/api/v1/nodes`, {
      method: 'POST',
      body: JSON.stringify(sampleNode('n1')),
    });
    const nodeRv = Number(
      ((await node.json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    );
    assert.ok(nodeRv > Number(created.metadata.resourceVersion));
    const put = await fetch(`${server.url}/api/v1/namespaces/web/services/front`, {
      method: 'PUT',
      body: JSON.stringify(sampleService('web', 'front', { port: 8443 })),
    });
    assert.equal(put.status, 200);
    assert.equal(
      (await fetch(`${server.url}/api/v1/namespaces/web/services/front`, { method: 'DELETE' })).status,
      200,
    );
    assert.equal((await fetch(`${server.url}/api/v1/namespaces/web/services/front`)).status, 404);
    assert.equal((await fetch(`${server.url}/api/v1/nodes/n1`)).status, 200);
  });

  test('a selector-filtered watch sees objects enter (ADDED) and leave (DELETED) its selection', async () => {
    const rv = server.state.resourceVersion;
    const lines = watchLines(
      `${server.url}/api/v1/services?watch=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent('!service.kubernetes.io/service-proxy-name')}`,
      (l) => l.length >= 3,
    );
    server.state.apply(
      SERVICES,
      sampleService('sel', 'x', { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
    );
    server.state.apply(SERVICES, sampleService('sel', 'x'));
    server.state.apply(SERVICES, sampleService('sel', 'x', { port: 1 }));
    server.state.apply(
      SERVICES,
      sampleService('sel', 'x', { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
    );
    const got = await lines;
    assert.deepEqual(
      got.map((l) => `${l.type} ${l.object.kind}`),
      ['ADDED Service', 'MODIFIED Service', 'DELETED Service'],
    );
  });

  test('watch-list sends the current objects, then a bookmark marked initial-events-end', async () => {
    const got = await watchLines(
      `${server.url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.namespace%3Dns1`,
      (l) => l.some((e) => e.type === 'BOOKMARK'),
    );
    assert.deepEqual(
      got.map((l) => l.type),
      ['ADDED', 'ADDED', 'ADDED', 'BOOKMARK'],
    );
    const bookmark = got[3]!.object;
    assert.equal(bookmark.metadata.annotations?.['k8s.io/initial-events-end'], 'true');
    assert.deepEqual(Object.keys(bookmark.metadata).sort(), ['annotations', 'resourceVersion']);
  });

  test('a watch from a compacted resourceVersion gets an ERROR event with a 410 Expired Status', async () => {
    const old = server.state.resourceVersion;
    for (let i = 0; i < 25; i++) server.state.apply(SERVICES, sampleService('churn', `c${i}`));
    const got = await watchLines(
      `${server.url}/api/v1/services?watch=true&resourceVersion=${old}`,
      () => false,
    );
    assert.equal(got.length, 1);
    assert.equal(got[0]?.type, 'ERROR');
    assert.equal(got[0]?.object.code, 410);
    assert.equal(got[0]?.object.reason, 'Expired');
  });

  test('bookmarks carry only the current resourceVersion', async () => {
    const got = await watchLines(
      `${server.url}/api/v1/nodes?watch=true&resourceVersion=${server.state.resourceVersion}&allowWatchBookmarks=true`,
      (l) => l.length >= 1,
    );
    assert.equal(got[0]?.type, 'BOOKMARK');
    assert.equal(got[0]?.object.metadata.resourceVersion, String(server.state.resourceVersion));
  });

  test('bad selectors are 400 with a Status body', async () => {
    const res = await fetch(`${server.url}/api/v1/services?fieldSelector=spec.clusterIP%3D1.2.3.4`);
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { kind: string }).kind, 'Status');
  });
});

test('the stand-in runs as a process serving objects from a data file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kproxy-apiserver-'));
  const data = join(dir, 'cluster.yaml');
  writeFileSync(
    data,
    `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: default}
  spec: {clusterIP: 10.96.0.20, ports: [{port: 80, protocol: TCP}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
`,
  );
  const child = spawn(
    process.execPath,
    ['harness/apiserver/main.ts', '--data', data, '--token', 'lab-token'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  t.after(() => {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) =>
      resolve(line.replace(/^listening /, '')),
    );
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  assert.equal((await fetch(`${url}/api/v1/services`)).status, 401);
  const res = await fetch(`${url}/api/v1/services`, { headers: { authorization: 'Bearer lab-token' } });
  const list = (await res.json()) as { items: { metadata: { name: string } }[] };
  assert.deepEqual(
    list.items.map((i) => i.metadata.name),
    ['web'],
  );
});

// What kubectl needs beyond informers; kubectl.test.ts runs the real thing when kubectl is installed.
describe('stand-in API server: what kubectl uses', async () => {
  const server = await startApiServer();
  after(() => server.stop());
  const json = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${server.url}${path}`, init);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  test('discovery: /api, /apis and each group version list the served resources', async () => {
    assert.deepEqual((await json('/api')).body.versions, ['v1']);
    const groups = (await json('/apis')).body.groups as {
      name: string;
      preferredVersion: { groupVersion: string };
    }[];
    assert.deepEqual(
      groups.map((g) => [g.name, g.preferredVersion.groupVersion]),
      [
        ['discovery.k8s.io', 'discovery.k8s.io/v1'],
        ['networking.k8s.io', 'networking.k8s.io/v1'],
      ],
    );
    const core = (await json('/api/v1')).body as {
      kind: string;
      resources: { name: string; namespaced: boolean; shortNames?: string[]; verbs: string[] }[];
    };
    assert.equal(core.kind, 'APIResourceList');
    assert.deepEqual(
      core.resources.map((r) => [r.name, r.namespaced, r.shortNames]),
      [
        ['services', true, ['svc']],
        ['nodes', false, ['no']],
      ],
    );
    assert.ok(
      core.resources.every((r) =>
        ['get', 'list', 'watch', 'create', 'patch', 'delete'].every((v) => r.verbs.includes(v)),
      ),
    );
    const discovery = (await json('/apis/discovery.k8s.io/v1')).body as {
      resources: { name: string; kind: string }[];
    };
    assert.deepEqual(
      discovery.resources.map((r) => [r.name, r.kind]),
      [['endpointslices', 'EndpointSlice']],
    );
    const networking = (await json('/apis/networking.k8s.io/v1')).body as {
      resources: { name: string; kind: string; namespaced: boolean }[];
    };
    assert.deepEqual(
      networking.resources.map((r) => [r.name, r.kind, r.namespaced]),
      [['servicecidrs', 'ServiceCIDR', false]],
    );
    assert.equal((await json('/apis/networking.k8s.io/v1beta1')).status, 404);
  });

  test("ServiceCIDRs: listed, and printed with kube-apiserver's columns", async () => {
    server.state.apply(SERVICE_CIDRS, {
      metadata: { name: 'kubernetes' },
      spec: { cidrs: ['10.96.0.0/12'] },
    });
    const list = (await json('/apis/networking.k8s.io/v1/servicecidrs')).body as {
      kind: string;
      items: { metadata: { name: string }; spec: { cidrs: string[] } }[];
    };
    assert.equal(list.kind, 'ServiceCIDRList');
    assert.deepEqual(
      list.items.map((i) => [i.metadata.name, i.spec.cidrs]),
      [['kubernetes', ['10.96.0.0/12']]],
    );
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const { body } = await json('/apis/networking.k8s.io/v1/servicecidrs', { headers: { accept } });
    const table = body as { columnDefinitions: { name: string }[]; rows: { cells: string[] }[] };
    assert.deepEqual(
      table.columnDefinitions.map((c) => c.name),
      ['Name', 'CIDRs', 'Age'],
    );
    assert.deepEqual(table.rows[0]?.cells.slice(0, 2), ['kubernetes', '10.96.0.0/12']);
  });

  test('a resource it is told not to serve answers 404, as a server older than it', async () => {
    const old = await startApiServer({ unserved: ['servicecidrs'] });
    try {
      const res = await fetch(`${old.url}/apis/networking.k8s.io/v1/servicecidrs`);
      assert.equal(res.status, 404);
      assert.equal(((await res.json()) as { reason: string }).reason, 'NotFound');
    } finally {
      await old.stop();
    }
  });

  test("a Table when asked for one: kube-apiserver's columns, a row per object with its metadata", async () => {
    server.state.apply(SERVICES, sampleService('web', 'table', { clusterIP: '10.96.0.77', port: 53 }));
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const { body } = await json('/api/v1/namespaces/web/services?labelSelector=', { headers: { accept } });
    const table = body as {
      kind: string;
      columnDefinitions: { name: string }[];
      rows: { cells: string[]; object: { kind: string; metadata: { name: string } } }[];
    };
    assert.equal(table.kind, 'Table');
    assert.deepEqual(
      table.columnDefinitions.map((c) => c.name),
      ['Name', 'Type', 'Cluster-IP', 'External-IP', 'Port(s)', 'Age', 'Selector'],
    );
    const row = table.rows.find((r) => r.cells[0] === 'table');
    assert.deepEqual(row?.cells.slice(0, 5), ['table', 'ClusterIP', '10.96.0.77', '<none>', '53/TCP']);
    assert.equal(row?.object.kind, 'PartialObjectMetadata');
    assert.equal(
      (await json('/api/v1/namespaces/web/services?includeObject=Nope', { headers: { accept } })).status,
      400,
    );
  });

  test('create stamps uid and creationTimestamp; PATCH merges; server-side apply is refused with 415', async () => {
    const created = await json('/api/v1/namespaces/web/services', {
      method: 'POST',
      body: JSON.stringify(sampleService('web', 'p')),
    });
    assert.equal(created.status, 201);
    const meta = created.body.metadata as { uid: string; creationTimestamp: string };
    assert.match(meta.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const patch = (type: string, body: unknown, name = 'p') =>
      json(`/api/v1/namespaces/web/services/${name}`, {
        method: 'PATCH',
        headers: { 'content-type': type },
        body: JSON.stringify(body),
      });
    const merged = await patch('application/strategic-merge-patch+json', {
      spec: { ports: [{ port: 9090, protocol: 'TCP' }] },
    });
    assert.equal(merged.status, 200);
    assert.deepEqual(
      (merged.body.spec as { ports: { port: number }[] }).ports.map((p) => p.port),
      [80, 9090],
    );
    assert.equal(
      (merged.body.metadata as { uid: string; creationTimestamp: string }).creationTimestamp,
      meta.creationTimestamp,
    );
    const replaced = await patch('application/merge-patch+json', { spec: { ports: [{ port: 7070 }] } });
    assert.deepEqual((replaced.body.spec as { ports: { port: number }[] }).ports, [{ port: 7070 }]);
    assert.equal((await patch('application/apply-patch+yaml', {})).status, 415);
    assert.equal((await patch('application/merge-patch+json', {}, 'missing')).status, 404);
    const stale = await patch('application/merge-patch+json', { metadata: { resourceVersion: '1' } });
    assert.equal(stale.status, 409);
  });

  test('DELETE answers as kube-apiserver: a Service returns the object, a Node a Status naming it', async () => {
    server.state.apply(SERVICES, sampleService('web', 'gone'));
    const svc = await json('/api/v1/namespaces/web/services/gone', { method: 'DELETE' });
    assert.deepEqual(
      [svc.status, svc.body.kind, (svc.body.metadata as { name: string }).name],
      [200, 'Service', 'gone'],
    );
    server.state.apply(NODES, sampleNode('gone'));
    const node = await json('/api/v1/nodes/gone', { method: 'DELETE' });
    assert.deepEqual(
      [node.status, node.body.kind, node.body.status, (node.body.details as { kind: string }).kind],
      [200, 'Status', 'Success', 'nodes'],
    );
    const missing = await json('/api/v1/nodes/gone', { method: 'DELETE' });
    assert.deepEqual([missing.status, missing.body.reason], [404, 'NotFound']);
  });
});
