import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ServiceSpec } from '../../src/kube/objects.ts';
import {
  addresses,
  build,
  type EndpointExtra,
  endpoint,
  portOf,
  service,
  slice,
  THIS_NODE,
} from './fixtures.ts';

const WEB = 'default/web:80/TCP';
const LOCAL = { nodeName: THIS_NODE };
const TERMINATING = { ready: false, serving: true, terminating: true };
const NOT_SERVING_TERMINATING = { ready: false, serving: false, terminating: true };

const CLUSTER_IP: ServiceSpec = {};
const ITP_LOCAL: ServiceSpec = { internalTrafficPolicy: 'Local' };
const ETP_LOCAL: ServiceSpec = {
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  ports: [{ name: 'http', port: 80, nodePort: 30080 }],
};

function select(spec: ServiceSpec, endpoints: [string, EndpointExtra][]) {
  const out = build([
    service('web', spec),
    slice(
      'web',
      endpoints.map(([ip, extra]) => endpoint(ip, extra)),
    ),
  ]);
  const port = portOf(out, WEB);
  return {
    cluster: addresses(port.clusterEndpoints),
    local: addresses(port.localEndpoints),
    hasEndpoints: port.hasEndpoints,
  };
}

describe('Cluster traffic', () => {
  it('uses every ready endpoint and leaves Local empty for a Cluster-only service', () => {
    const got = select(CLUSTER_IP, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', {}],
      ['10.244.2.2', { ready: false }],
    ]);
    assert.deepEqual(got, { cluster: ['10.244.1.1:8080', '10.244.2.1:8080'], local: [], hasEndpoints: true });
  });

  it('falls back to serving terminating endpoints when none is ready', () => {
    const got = select(CLUSTER_IP, [
      ['10.244.2.1', TERMINATING],
      ['10.244.2.2', NOT_SERVING_TERMINATING],
      ['10.244.2.3', { ready: false }],
    ]);
    assert.deepEqual(got, { cluster: ['10.244.2.1:8080'], local: [], hasEndpoints: true });
  });

  it('does not mix terminating endpoints in while one is ready', () => {
    const got = select(CLUSTER_IP, [
      ['10.244.2.1', TERMINATING],
      ['10.244.2.2', {}],
    ]);
    assert.deepEqual(got.cluster, ['10.244.2.2:8080']);
  });

  it('has no endpoints when nothing is ready or serving-terminating (REJECT)', () => {
    const got = select(CLUSTER_IP, [
      ['10.244.2.2', NOT_SERVING_TERMINATING],
      ['10.244.2.3', { ready: false }],
    ]);
    assert.deepEqual(got, { cluster: [], local: [], hasEndpoints: false });
  });

  it('has no endpoints when no slice exists', () => {
    assert.deepEqual(select(CLUSTER_IP, []), { cluster: [], local: [], hasEndpoints: false });
  });
});

describe('internalTrafficPolicy Local', () => {
  it('uses only local ready endpoints and no Cluster endpoints', () => {
    const got = select(ITP_LOCAL, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got, { cluster: [], local: ['10.244.1.1:8080'], hasEndpoints: true });
  });

  it('has endpoints but no local ones when they all run elsewhere (DROP, not REJECT)', () => {
    const got = select(ITP_LOCAL, [['10.244.2.1', {}]]);
    assert.deepEqual(got, { cluster: [], local: [], hasEndpoints: true });
  });

  it('falls back to local serving terminating endpoints only when no local endpoint is ready', () => {
    const got = select(ITP_LOCAL, [
      ['10.244.1.1', { ...LOCAL, ...TERMINATING }],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got.local, ['10.244.1.1:8080']);
    const withReady = select(ITP_LOCAL, [
      ['10.244.1.1', { ...LOCAL, ...TERMINATING }],
      ['10.244.1.2', LOCAL],
    ]);
    assert.deepEqual(withReady.local, ['10.244.1.2:8080']);
  });

  it('counts a remote serving terminating endpoint as an endpoint', () => {
    const got = select(ITP_LOCAL, [['10.244.2.1', TERMINATING]]);
    assert.deepEqual(got, { cluster: [], local: [], hasEndpoints: true });
  });

  it('still fills Cluster endpoints when the service is also reachable from outside', () => {
    const got = select({ ...ETP_LOCAL, externalTrafficPolicy: 'Cluster', internalTrafficPolicy: 'Local' }, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got, {
      cluster: ['10.244.1.1:8080', '10.244.2.1:8080'],
      local: ['10.244.1.1:8080'],
      hasEndpoints: true,
    });
  });
});

describe('externalTrafficPolicy Local', () => {
  it('fills both sets: Cluster for internal traffic, Local for external traffic', () => {
    const got = select(ETP_LOCAL, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got, {
      cluster: ['10.244.1.1:8080', '10.244.2.1:8080'],
      local: ['10.244.1.1:8080'],
      hasEndpoints: true,
    });
  });

  it('decides the terminating fallback separately for Cluster and Local', () => {
    // Remote endpoint ready, local one only terminating: Cluster uses the ready one, Local falls back.
    const got = select(ETP_LOCAL, [
      ['10.244.1.1', { ...LOCAL, ...TERMINATING }],
      ['10.244.2.1', {}],
    ]);
    assert.deepEqual(got, { cluster: ['10.244.2.1:8080'], local: ['10.244.1.1:8080'], hasEndpoints: true });
  });

  it('leaves Local empty on a ClusterIP service with eTP Local and no external IPs', () => {
    const got = select({ externalTrafficPolicy: 'Local' }, [['10.244.1.1', LOCAL]]);
    assert.deepEqual(got.local, []);
  });
});

describe('serving endpoints no new traffic uses (kept for their UDP flows)', () => {
  const others = (spec: ServiceSpec, endpoints: [string, EndpointExtra][]) => {
    const out = build([
      service('web', spec),
      slice(
        'web',
        endpoints.map(([ip, extra]) => endpoint(ip, extra)),
      ),
    ]);
    const port = portOf(out, WEB);
    return port.otherServingEndpoints && addresses(port.otherServingEndpoints);
  };

  it('are absent when the used sets hold every serving endpoint', () => {
    assert.equal(
      others(CLUSTER_IP, [
        ['10.244.1.1', {}],
        ['10.244.2.1', {}],
      ]),
      undefined,
    );
    assert.equal(others(CLUSTER_IP, [['10.244.1.1', NOT_SERVING_TERMINATING]]), undefined);
  });

  it('hold a terminating endpoint while others are ready, and remote ones under internalTrafficPolicy Local', () => {
    assert.deepEqual(
      others(CLUSTER_IP, [
        ['10.244.1.1', TERMINATING],
        ['10.244.2.1', {}],
        ['10.244.2.2', NOT_SERVING_TERMINATING],
      ]),
      ['10.244.1.1:8080'],
    );
    assert.deepEqual(
      others(ITP_LOCAL, [
        ['10.244.1.1', LOCAL],
        ['10.244.2.1', {}],
      ]),
      ['10.244.2.1:8080'],
    );
  });
});
