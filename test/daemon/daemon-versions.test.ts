// The daemon against the stand-in API server as each Kubernetes minor serves it (profiles.ts), in
// one daemon's life: the server starts as 1.29 and is restarted as each newer minor in turn while
// kproxy runs, as a control plane is upgraded (state and resourceVersions kept, connections cut;
// the upgrade to 1.33 also answers 503 while its paths install, resets a connection and sheds
// load with 429). At each minor the test writes over HTTP what a user or controller would, and the
// daemon must sync what that minor kept: a LoadBalancer ingress with ipMode Proxy is a VIP only in
// 1.29 (the field dropped), node hints steer traffic only from 1.34 (hints.forNodes dropped
// before). /healthz stays reachable as 200. Then ERROR events mid-watch, and RBAC that forbids
// ServiceCIDRs (403).
import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import http from 'node:http';
import { describe, test } from 'node:test';
import { MINORS, type Minor } from '../../harness/apiserver/profiles.ts';
import { sampleEndpointSlice, sampleNode, sampleService } from '../../harness/apiserver/sample-objects.ts';
import type { ApiServerOptions, StandInApiServer } from '../../harness/apiserver/server.ts';
import { ENDPOINT_SLICES, NODES, objectPath, type ResourceType, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from './daemon-harness.ts';
import { startRecordingDaemon } from './recording-daemon.ts';

async function run(t: { after(fn: () => Promise<unknown>): void }, options: ApiServerOptions) {
  const { api, dataplane, daemon } = await startRecordingDaemon(t, {
    apiOptions: options,
    objects: (api) => api.state.apply(NODES, sampleNode('node-1')),
  });
  const healthz = async () => (await fetch(`${daemon.healthzUrl}/healthz`)).status;
  return { api, dataplane, healthz };
}

/**
 * Writes as a client does, so that the server of the minor decides what it keeps. A connection of
 * its own each time: a pooled one may be the one an upgrade just cut.
 */
async function put(api: StandInApiServer, resource: ResourceType, object: Record<string, unknown>) {
  const meta = object.metadata as { namespace?: string; name: string };
  const exists = api.state.get(resource, meta.namespace, meta.name) !== undefined;
  const path = objectPath(resource, meta.namespace, exists ? meta.name : undefined);
  const body = JSON.stringify(object);
  const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(`${api.url}${path}`, {
      method: exists ? 'PUT' : 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('response', async (res) => {
      let text = '';
      for await (const chunk of res) text += chunk;
      resolve({ status: res.statusCode ?? 0, text });
    });
    req.on('error', reject);
    req.end(body);
  });
  assert.ok(answer.status < 300, `${answer.status} ${answer.text}`);
}

/** A LoadBalancer whose ingress is reached through the load balancer (ipMode Proxy), not as a VIP. */
function proxiedLoadBalancer() {
  const lb = sampleService('default', 'lb', { clusterIP: '10.96.0.20' });
  Object.assign(lb.spec as object, { type: 'LoadBalancer' });
  (lb.spec as { ports: Record<string, unknown>[] }).ports[0]!.nodePort = 30080;
  return { ...lb, status: { loadBalancer: { ingress: [{ ip: '192.0.2.10', ipMode: 'Proxy' }] } } };
}

/** Two endpoints of web in this node's zone, one hinted for this node, one for another (PreferSameNode). */
function hintedSlice(step: number) {
  const addresses = [`10.244.${step}.1`, `10.244.${step}.2`];
  const slice = sampleEndpointSlice('default', 'web-abc', { service: 'web', addresses });
  const endpoints = slice.endpoints as Record<string, unknown>[];
  endpoints[0]!.hints = { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-1' }] };
  endpoints[1]!.hints = { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-2' }] };
  return slice;
}

const minorNumber = (m: Minor) => Number(m.split('.')[1]);

describe('the daemon against each Kubernetes minor, upgraded 1.29 -> 1.38 while it runs', () => {
  test('every minor: what it keeps is synced, a change after each upgrade is followed, /healthz 200', async (t) => {
    const r = await run(t, { version: MINORS[0] });
    await put(r.api, SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
    for (const [step, minor] of MINORS.entries()) {
      if (step > 0) {
        if (minor === '1.33') {
          r.api.faults.failNext(2, 503);
          r.api.faults.resetNext(1);
          r.api.faults.overloadNext(1, 1);
        }
        await r.api.restartAs(minor);
      }
      assert.equal(r.api.version, minor);
      await put(r.api, SERVICES, proxiedLoadBalancer());
      await put(r.api, ENDPOINT_SLICES, hintedSlice(step));
      const nodeHints = minorNumber(minor) >= 34;
      const expected = nodeHints ? [`10.244.${step}.1`] : [`10.244.${step}.1`, `10.244.${step}.2`];
      const vips = minorNumber(minor) >= 30 ? [] : ['192.0.2.10'];
      await eventually(`${minor}: the slice and the LoadBalancer as ${minor} keeps them are synced`, () => {
        const ports = r.dataplane.last?.state.IPv4?.servicePorts;
        const web = ports?.get('default/web:80/TCP')?.clusterEndpoints.map((e) => e.ip);
        const lb = ports?.get('default/lb:80/TCP')?.loadBalancerIPs;
        return JSON.stringify([web, lb]) === JSON.stringify([expected, vips]);
      });
      await eventually(`${minor}: /healthz 200`, async () => (await r.healthz()) === 200);
    }
    assert.equal(
      r.api.faults.pending.reduce((left, f) => left + f.count, 0),
      0,
      'the upgrade faults were met',
    );
  });

  test('ERROR events mid-watch (410, 500): the watches resume and a later change is synced; /healthz 200', async (t) => {
    const r = await run(t, { version: '1.32' });
    await put(r.api, SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
    await eventually(
      'web synced',
      () => r.dataplane.last?.state.IPv4?.servicePorts.has('default/web:80/TCP') === true,
    );
    for (const [i, code] of ([410, 500] as const).entries()) {
      await eventually('watches open', () => r.api.openWatches >= 3);
      r.api.faults.errorInWatches(code);
      await put(r.api, ENDPOINT_SLICES, hintedSlice(i));
      await eventually(
        `the change after the ${code} ERROR is synced`,
        () =>
          r.dataplane.last?.state.IPv4?.servicePorts
            .get('default/web:80/TCP')
            ?.clusterEndpoints.some((e) => e.ip === `10.244.${i}.1`) === true,
      );
    }
    await eventually('/healthz 200', async () => (await r.healthz()) === 200);
  });

  test('RBAC that forbids ServiceCIDRs (403): services still sync, changes follow, /healthz 200', async (t) => {
    const r = await run(t, { version: '1.33', forbidden: ['servicecidrs'] });
    await put(r.api, SERVICES, sampleService('default', 'web', { clusterIP: '10.96.0.10' }));
    await put(r.api, ENDPOINT_SLICES, hintedSlice(7));
    await eventually(
      'web synced with its endpoints',
      () =>
        r.dataplane.last?.state.IPv4?.servicePorts.get('default/web:80/TCP')?.clusterEndpoints.length === 2,
    );
    assert.ok(
      r.api.requests.some((q) => q.path.endsWith('/servicecidrs')),
      'the daemon asked, and was refused',
    );
    await eventually('/healthz 200', async () => (await r.healthz()) === 200);
  });
});
