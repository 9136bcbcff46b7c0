// The stand-in API server as each Kubernetes minor serves it (harness/apiserver/profiles.ts), over
// plain HTTP: discovery, ServiceCIDRs, watch-list, the fields a write keeps, RBAC denials, a restart
// as a newer minor, and the error answers of a server under load or being upgraded.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { MINORS, type Minor, NEWEST_MINOR, PROFILES } from '../../../harness/apiserver/profiles.ts';
import { sampleEndpointSlice, sampleService } from '../../../harness/apiserver/sample-objects.ts';
import { type StandInApiServer, startApiServer } from '../../../harness/apiserver/server.ts';
import { ENDPOINT_SLICES, SERVICES } from '../../../src/kube/resources.ts';

async function server(t: { after(fn: () => Promise<void>): void }, version?: Minor, more = {}) {
  const api = await startApiServer({ ...(version ? { version } : {}), ...more });
  t.after(() => api.stop());
  return api;
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** What the tests read of a written object (or of the Status refusing it). */
interface Written {
  readonly metadata: { readonly resourceVersion: string };
  readonly spec: { readonly trafficDistribution?: string };
  readonly status: { readonly loadBalancer: { readonly ingress: unknown[] } };
  readonly message?: string;
}

async function send(api: StandInApiServer, method: string, path: string, object: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(object),
  });
  return {
    status: res.status,
    warning: res.headers.get('warning'),
    body: (await res.json()) as Written,
  };
}

const minor = (m: Minor) => Number(m.split('.')[1]);
const serviceCIDRsPath = '/apis/networking.k8s.io/v1/servicecidrs';

describe('the stand-in API server per Kubernetes minor', () => {
  test('the default is the newest release', async (t) => {
    const api = await server(t);
    assert.equal(api.version, NEWEST_MINOR);
    assert.equal((await getJson(`${api.url}/version`)).body.minor, NEWEST_MINOR.split('.')[1]);
  });

  for (const m of MINORS) {
    test(`${m}: /version, discovery and the ServiceCIDR list say what ${m} serves`, async (t) => {
      const api = await server(t, m);
      const version = (await getJson(`${api.url}/version`)).body;
      assert.equal(`${version.major}.${version.minor}`, m);
      assert.equal(version.gitVersion, `v${m}.0-kproxy-stand-in`);
      const groups = (await getJson(`${api.url}/apis`)).body.groups as { name: string }[];
      assert.ok(
        groups.some((g) => g.name === 'networking.k8s.io'),
        'networking.k8s.io is in every minor',
      );
      const networking = (await getJson(`${api.url}/apis/networking.k8s.io/v1`)).body;
      const names = (networking.resources as { name: string }[]).map((r) => r.name);
      const list = await getJson(`${api.url}${serviceCIDRsPath}`);
      if (minor(m) >= 33) {
        assert.deepEqual(names, ['servicecidrs']);
        assert.equal(list.status, 200);
        assert.equal(list.body.kind, 'ServiceCIDRList');
      } else {
        assert.deepEqual(names, [], 'no networking.k8s.io/v1 servicecidrs before 1.33');
        assert.deepEqual(list, {
          status: 404,
          body: {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: 'the server could not find the requested resource',
            reason: 'NotFound',
            details: {},
            code: 404,
          },
        });
      }
      const core = (await getJson(`${api.url}/api/v1`)).body.resources as { name: string }[];
      assert.deepEqual(
        core.map((r) => r.name),
        ['services', 'nodes'],
      );
    });
  }

  test('watch-list is served in 1.32 and from 1.34 on (the WatchList gate), refused with 422 elsewhere', async (t) => {
    for (const m of MINORS) {
      const api = await server(t, m);
      const res = await fetch(
        `${api.url}/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1`,
      );
      const served = m === '1.32' || minor(m) >= 34;
      assert.equal(PROFILES[m].watchList, served, m);
      if (served) {
        assert.equal(res.status, 200, m);
        await res.body?.cancel();
      } else {
        assert.equal(res.status, 422, m);
        const body = (await res.json()) as { message: string; reason: string };
        assert.equal(body.reason, 'Invalid');
        assert.equal(
          body.message,
          'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        );
      }
    }
  });

  test('spec.trafficDistribution: pruned as unknown in 1.29, dropped in 1.30, kept from 1.31; PreferSameNode refused before 1.34', async (t) => {
    for (const m of MINORS) {
      const api = await server(t, m);
      const service = sampleService('default', 'web', { clusterIP: '10.96.0.10' });
      (service.spec as Record<string, unknown>).trafficDistribution = 'PreferClose';
      const created = await send(api, 'POST', '/api/v1/namespaces/default/services', service);
      assert.equal(created.status, 201, m);
      const kept = created.body.spec.trafficDistribution;
      assert.equal(kept, minor(m) >= 31 ? 'PreferClose' : undefined, m);
      assert.equal(
        created.warning,
        m === '1.29' ? '299 - "unknown field \\"spec.trafficDistribution\\""' : null,
        `${m}: only a minor without the field warns of it`,
      );
      (service.spec as Record<string, unknown>).trafficDistribution = 'PreferSameNode';
      const updated = await send(api, 'PUT', '/api/v1/namespaces/default/services/web', service);
      if (minor(m) >= 34) assert.equal(updated.body.spec.trafficDistribution, 'PreferSameNode', m);
      else if (minor(m) >= 31) {
        assert.equal(updated.status, 422, m);
        assert.equal(
          updated.body.message,
          'Service "web" is invalid: spec.trafficDistribution: Unsupported value: "PreferSameNode": supported values: "PreferClose"',
        );
        assert.equal(
          api.state.get(SERVICES, 'default', 'web')?.metadata.resourceVersion,
          created.body.metadata.resourceVersion,
          'a refused write changes nothing',
        );
      } else assert.equal(updated.body.spec.trafficDistribution, undefined, m);
    }
  });

  test('ipMode kept from 1.30, hints.forNodes from 1.34; each dropped before, by PATCH too', async (t) => {
    for (const m of MINORS) {
      const api = await server(t, m);
      const service = sampleService('default', 'lb', { clusterIP: '10.96.0.20' });
      Object.assign(service, {
        status: { loadBalancer: { ingress: [{ ip: '192.0.2.1', ipMode: 'Proxy' }] } },
      });
      const lb = await send(api, 'POST', '/api/v1/namespaces/default/services', service);
      assert.deepEqual(
        lb.body.status.loadBalancer.ingress,
        [minor(m) >= 30 ? { ip: '192.0.2.1', ipMode: 'Proxy' } : { ip: '192.0.2.1' }],
        m,
      );
      const slice = sampleEndpointSlice('default', 'lb-abc', { service: 'lb' });
      const created = await send(
        api,
        'POST',
        '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
        slice,
      );
      assert.equal(created.status, 201);
      const res = await fetch(
        `${api.url}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/lb-abc`,
        {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({
            endpoints: [
              {
                addresses: ['10.244.0.5'],
                hints: { forZones: [{ name: 'a' }], forNodes: [{ name: 'node-1' }] },
              },
            ],
          }),
        },
      );
      const patched = (await res.json()) as { endpoints: { hints: unknown }[] };
      assert.deepEqual(
        patched.endpoints[0]!.hints,
        minor(m) >= 34
          ? { forZones: [{ name: 'a' }], forNodes: [{ name: 'node-1' }] }
          : { forZones: [{ name: 'a' }] },
        m,
      );
      assert.equal(
        res.headers.get('warning'),
        minor(m) < 33 ? '299 - "unknown field \\"endpoints[0].hints.forNodes\\""' : null,
        m,
      );
      assert.deepEqual(api.state.get(ENDPOINT_SLICES, 'default', 'lb-abc')?.endpoints, patched.endpoints);
    }
  });

  test('RBAC that does not grant servicecidrs: 403 with the Status kube-apiserver sends', async (t) => {
    const api = await server(t, '1.33', { forbidden: ['servicecidrs'] });
    assert.deepEqual(await getJson(`${api.url}${serviceCIDRsPath}?watch=true`), {
      status: 403,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message:
          'servicecidrs.networking.k8s.io is forbidden: User "system:kube-proxy" cannot watch resource "servicecidrs" in API group "networking.k8s.io" at the cluster scope',
        reason: 'Forbidden',
        details: { group: 'networking.k8s.io', kind: 'servicecidrs' },
        code: 403,
      },
    });
    assert.equal((await getJson(`${api.url}/api/v1/services`)).status, 200, 'the rest stays granted');
  });

  test('restartAs: the same address, another minor, the state and its resourceVersions kept; open watches ended cleanly', async (t) => {
    const api = await server(t, '1.31');
    api.state.apply(SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
    const before = (await getJson(`${api.url}/api/v1/services`)).body.metadata as { resourceVersion: string };
    const url = api.url;
    // As kube-apiserver's graceful termination drains watches: the response completes, no reset.
    const ended = new Promise<boolean>((resolve) => {
      http.get(`${url}/api/v1/services?watch=true&resourceVersion=${before.resourceVersion}`, (res) => {
        res.on('error', () => resolve(false));
        res.on('close', () => resolve(res.complete));
        res.resume();
      });
    });
    while (api.openWatches === 0) await new Promise((r) => setTimeout(r, 10));
    await api.restartAs('1.33');
    assert.equal(await ended, true, 'the watch ended cleanly');
    assert.equal(api.url, url);
    assert.equal(api.version, '1.33');
    const after = await getJson(`${api.url}/api/v1/services`);
    assert.equal(
      (after.body.metadata as { resourceVersion: string }).resourceVersion,
      before.resourceVersion,
    );
    assert.equal((after.body.items as unknown[]).length, 1);
    assert.equal((await getJson(`${api.url}${serviceCIDRsPath}`)).status, 200, '1.33 serves ServiceCIDRs');
  });

  test('faults: 429 with Retry-After (shed by overload: plain text), 500, 503 of a starting server, a reset connection, ERROR mid-watch', async (t) => {
    const api = await server(t);
    api.faults.overloadNext(1, 3);
    const shed = await fetch(`${api.url}/api/v1/services`);
    assert.equal(shed.status, 429);
    assert.equal(shed.headers.get('retry-after'), '3');
    assert.equal(shed.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(await shed.text(), 'Too many requests, please try again later.\n');
    api.faults.failNext(1, 429, 3);
    const limited = await fetch(`${api.url}/api/v1/services`);
    assert.equal(limited.headers.get('retry-after'), '3');
    assert.deepEqual(await limited.json(), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'injected fault: 429',
      reason: 'TooManyRequests',
      details: { retryAfterSeconds: 3 },
      code: 429,
    });
    api.faults.failNext(1, 500);
    assert.equal(
      ((await getJson(`${api.url}/api/v1/services`)).body as { reason: string }).reason,
      'InternalError',
    );
    api.faults.failNext(1, 503);
    const starting = await getJson(`${api.url}/api/v1/services`);
    assert.equal(starting.status, 503);
    assert.equal(starting.body.reason, 'ServiceUnavailable');
    api.faults.resetNext(1);
    await assert.rejects(
      fetch(`${api.url}/api/v1/services`),
      (err: Error & { cause?: { code?: string } }) => {
        assert.equal(err.cause?.code, 'ECONNRESET');
        return true;
      },
    );
    assert.equal((await getJson(`${api.url}/api/v1/services`)).status, 200, 'one fault, one request');

    const rv = ((await getJson(`${api.url}/api/v1/services`)).body.metadata as { resourceVersion: string })
      .resourceVersion;
    const events = new Promise<string[]>((resolve) => {
      http.get(`${api.url}/api/v1/services?watch=true&resourceVersion=${rv}`, (res) => {
        const lines: string[] = [];
        createInterface({ input: res }).on('line', (l) => lines.push(l));
        res.on('end', () => resolve(lines));
      });
    });
    while (api.openWatches === 0) await new Promise((r) => setTimeout(r, 10));
    api.faults.errorInWatches(410);
    const [line, ...rest] = await events;
    assert.deepEqual(rest, [], 'the watch ends after its ERROR event');
    assert.deepEqual(JSON.parse(line!), {
      type: 'ERROR',
      object: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'The resourceVersion for the provided watch is too old.',
        reason: 'Expired',
        code: 410,
      },
    });
  });

  test('as a process: --version and --forbid; stdin restarts it as another minor and arms faults', async (t) => {
    const child = spawn(
      process.execPath,
      ['harness/apiserver/main.ts', '--version', '1.32', '--forbid', 'services'],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    t.after(() => child.kill('SIGTERM'));
    const lines: string[] = [];
    const errors: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
    createInterface({ input: child.stderr! }).on('line', (l) => errors.push(l));
    const printed = async (line: string) => {
      while (!lines.includes(line)) await new Promise((r) => setTimeout(r, 10));
    };
    while (lines.length === 0) await new Promise((r) => setTimeout(r, 10));
    const url = lines[0]!.replace(/^listening /, '');
    assert.equal((await getJson(`${url}/version`)).body.minor, '32');
    assert.equal((await getJson(`${url}/api/v1/services`)).status, 403);
    assert.equal((await getJson(`${url}${serviceCIDRsPath}`)).status, 404);

    child.stdin!.write('restart 1.33\n');
    await printed('restarted 1.33');
    assert.equal((await getJson(`${url}/version`)).body.minor, '33');
    assert.equal((await getJson(`${url}${serviceCIDRsPath}`)).status, 200);
    child.stdin!.write('fail 503 1\nrestart 1.28\nfail 404 1\n');
    await printed('armed fail 503 1');
    while (errors.length < 2) await new Promise((r) => setTimeout(r, 10));
    assert.match(errors[0]!, /"restart 1.28": expected restart <minor>/);
    assert.match(errors[1]!, /"fail 404 1": expected fail <429\|500\|503>/);
    assert.equal((await getJson(`${url}${serviceCIDRsPath}`)).status, 503);
    assert.equal((await getJson(`${url}${serviceCIDRsPath}`)).status, 200);
  });
});
