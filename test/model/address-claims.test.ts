import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeObject } from '../../src/kube/decode.ts';
import type { KubeObject, Service } from '../../src/kube/objects.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { build, options, service } from './fixtures.ts';

const OLD = '2025-01-01T00:00:00Z';
const NEW = '2026-01-01T00:00:00Z';

function decoded<T extends KubeObject>(raw: T): T {
  const result = decodeObject(raw);
  if (result.kind !== 'object') assert.fail(`fixture does not decode: ${JSON.stringify(result)}`);
  return result.object as T;
}

function portOf(out: ReturnType<typeof build>, key: string) {
  const port = out.state.IPv4?.servicePorts.get(key);
  assert.ok(port, `${key} is in the state`);
  return port;
}

describe('conflicting claims, resolved in the model', () => {
  it('an external IP equal to an older Service cluster IP is dropped from the newer one only', () => {
    const out = build([
      service(
        'new',
        { clusterIP: '10.96.0.20', externalIPs: ['10.96.0.10', '203.0.113.1'] },
        { created: NEW },
      ),
      service('old', { clusterIP: '10.96.0.10' }, { created: OLD }),
    ]);
    assert.equal(portOf(out, 'default/old:80/TCP').clusterIP, '10.96.0.10');
    const loser = portOf(out, 'default/new:80/TCP');
    assert.deepEqual(loser.externalIPs, ['203.0.113.1']);
    assert.equal(loser.clusterIP, '10.96.0.20');
    assert.deepEqual(out.problems, [
      {
        object: 'Service default/new',
        reason:
          'external IP 10.96.0.10:80/TCP is already the cluster IP of Service default/old, older; default/new:80/TCP goes without it',
      },
    ]);
  });

  it('the older Service keeps an address whatever its kind: here a newer cluster IP loses to an external IP', () => {
    const out = build([
      service('old', { clusterIP: '10.96.0.10', externalIPs: ['10.96.0.30'] }, { created: OLD }),
      service(
        'new',
        { clusterIP: '10.96.0.30', type: 'NodePort', ports: [{ port: 80, nodePort: 30080 }] },
        { created: NEW },
      ),
    ]);
    assert.deepEqual(portOf(out, 'default/old:80/TCP').externalIPs, ['10.96.0.30']);
    const loser = portOf(out, 'default/new:80/TCP');
    // Only the address goes: its node port still serves.
    assert.equal(loser.clusterIP, '');
    assert.equal(loser.nodePort, 30080);
  });

  it('two cluster IPs spelled differently are one address: the first by name keeps it when both are as old', () => {
    const out = build([service('b', { clusterIP: '10.1.1.01' }), service('a', { clusterIP: '010.1.1.1' })]);
    assert.equal(portOf(out, 'default/a:80/TCP').clusterIP, '10.1.1.1');
    assert.equal(portOf(out, 'default/b:80/TCP').clusterIP, '');
    assert.match(
      out.problems[0]!.reason,
      /cluster IP 10\.1\.1\.1:80\/TCP .* Service default\/a, as old and first by name/,
    );
    assert.equal(out.problems[0]!.object, 'Service default/b');
  });

  it('a Service with a creation time is older than one without', () => {
    const out = build([
      service('a', { clusterIP: '10.96.0.10' }),
      service('b', { clusterIP: '10.96.0.10' }, { created: NEW }),
    ]);
    assert.equal(portOf(out, 'default/b:80/TCP').clusterIP, '10.96.0.10');
    assert.equal(portOf(out, 'default/a:80/TCP').clusterIP, '');
  });

  it('other ports and protocols of the same address do not conflict', () => {
    const out = build([
      service('a', { clusterIP: '10.96.0.10' }),
      service('b', {
        clusterIP: '10.96.0.10',
        ports: [
          { name: 'dns', port: 80, protocol: 'UDP' },
          { name: 'alt', port: 81 },
        ],
      }),
    ]);
    assert.deepEqual(out.problems, []);
    assert.equal(portOf(out, 'default/b:80/UDP').clusterIP, '10.96.0.10');
  });

  it('a LoadBalancer IP equal to an older cluster IP, and a shared node port, go to the older Service', () => {
    const lb = {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.20',
      ports: [{ port: 80, nodePort: 30080 }],
    };
    const out = build([
      service('lb', lb, { created: NEW, ingress: [{ ip: '10.96.0.10' }, { ip: '198.51.100.1' }] }),
      service(
        'old',
        { clusterIP: '10.96.0.10', type: 'NodePort', ports: [{ port: 80, nodePort: 30080 }] },
        { created: OLD },
      ),
    ]);
    const loser = portOf(out, 'default/lb:80/TCP');
    assert.deepEqual(loser.loadBalancerIPs, ['198.51.100.1']);
    assert.equal(loser.nodePort, 0);
    assert.equal(portOf(out, 'default/old:80/TCP').nodePort, 30080);
    assert.deepEqual(out.problems.map((p) => p.reason).sort(), [
      'load balancer IP 10.96.0.10:80/TCP is already the cluster IP of Service default/old, older; default/lb:80/TCP goes without it',
      'node port 30080/TCP is already the node port of Service default/old, older; default/lb:80/TCP goes without it',
    ]);
  });

  it('a dual-stack node port conflict is reported once, and resolved in both families', () => {
    const spec = (v4: string, v6: string) => ({
      type: 'NodePort',
      clusterIP: v4,
      clusterIPs: [v4, v6],
      ports: [{ port: 80, nodePort: 30080 }],
    });
    const out = build(
      [service('a', spec('10.96.0.10', 'fd00::10')), service('b', spec('10.96.0.11', 'fd00::11'))],
      { nodeIPs: ['192.168.0.1', 'fd00::1'] },
    );
    assert.equal(out.problems.length, 1);
    assert.equal(out.state.IPv6?.servicePorts.get('default/b:80/TCP')?.nodePort, 0);
    assert.equal(out.state.IPv4?.servicePorts.get('default/b:80/TCP')?.nodePort, 0);
  });

  it('two ports of one Service with one node port: the first port by key keeps it', () => {
    const ports = [
      { name: 'a', port: 81, nodePort: 30080 },
      { name: 'b', port: 80, nodePort: 30080 },
    ];
    const out = build([service('a', { clusterIP: '10.96.0.10', type: 'NodePort', ports })]);
    assert.equal(portOf(out, 'default/a:80/TCP').nodePort, 30080);
    assert.equal(portOf(out, 'default/a:81/TCP').nodePort, 0);
    assert.deepEqual(
      out.problems.map((p) => p.reason),
      [
        'node port 30080/TCP is already the node port of its port default/a:80/TCP; default/a:81/TCP goes without it',
      ],
    );
  });

  it('an external IP equal to its own cluster IP is served once, as the cluster IP', () => {
    const out = build([service('a', { clusterIP: '10.96.0.10', externalIPs: ['10.96.0.10'] })]);
    const port = portOf(out, 'default/a:80/TCP');
    assert.equal(port.clusterIP, '10.96.0.10');
    assert.deepEqual(port.externalIPs, []);
    assert.deepEqual(out.problems, [
      {
        object: 'Service default/a',
        reason: 'external IP 10.96.0.10:80/TCP is also its cluster IP; served once, as that',
      },
    ]);
  });
});

describe('conflicting claims in the ModelCache', () => {
  const older = (): Service => decoded(service('old', { clusterIP: '10.96.0.10' }, { created: OLD }));
  const newer = (externalIPs: string[]): Service =>
    decoded(service('new', { clusterIP: '10.96.0.20', externalIPs }, { created: NEW }));

  it('leaves the older Service untouched when a newer one claims its address', () => {
    const cache = new ModelCache(options());
    cache.setService(older());
    const first = cache.update();
    cache.setService(newer(['10.96.0.10']));
    const second = cache.update();
    assert.deepEqual([...second.changed], ['default/new:80/TCP']);
    const old = 'default/old:80/TCP';
    assert.equal(second.state.IPv4!.servicePorts.get(old), first.state.IPv4!.servicePorts.get(old));
    assert.deepEqual(second.state.IPv4!.servicePorts.get('default/new:80/TCP')!.externalIPs, []);
    assert.equal(second.problems.length, 1);
  });

  it('gives the address to the loser in the same update that deletes the holder', () => {
    const cache = new ModelCache(options());
    const holder = older();
    cache.setService(holder);
    cache.setService(newer(['10.96.0.10']));
    cache.update();
    cache.deleteService(holder);
    const next = cache.update();
    assert.deepEqual([...next.changed].sort(), ['default/new:80/TCP', 'default/old:80/TCP']);
    assert.deepEqual(next.state.IPv4!.servicePorts.get('default/new:80/TCP')!.externalIPs, ['10.96.0.10']);
    assert.deepEqual(next.problems, []);
  });

  it('gives the address to the loser in the same update that moves the holder elsewhere', () => {
    const cache = new ModelCache(options());
    cache.setService(older());
    cache.setService(newer(['10.96.0.10']));
    cache.update();
    cache.setService(decoded(service('old', { clusterIP: '10.96.0.11' }, { created: OLD })));
    const next = cache.update();
    assert.deepEqual([...next.changed].sort(), ['default/new:80/TCP', 'default/old:80/TCP']);
    assert.deepEqual(next.state.IPv4!.servicePorts.get('default/new:80/TCP')!.externalIPs, ['10.96.0.10']);
  });
});

describe('health check node ports, one listener per node', () => {
  /** A LoadBalancer Service with externalTrafficPolicy Local and health check node port 32000. */
  const local = (
    name: string,
    clusterIP: string,
    created: string,
    ports = [{ port: 80, nodePort: 0 }],
  ): Service =>
    service(
      name,
      {
        type: 'LoadBalancer',
        clusterIP,
        externalTrafficPolicy: 'Local',
        healthCheckNodePort: 32000,
        // Node ports of their own: only the health check node port is contested.
        ports: ports.map((p, i) => ({
          name: `p${i}`,
          ...p,
          nodePort: (created === OLD ? 30000 : 31000) + p.port,
        })),
      },
      { created },
    );

  it('two Services with one health check node port: the older keeps it, all its ports, and nothing else is lost', () => {
    const out = build([
      local('new', '10.96.0.20', NEW),
      local('old', '10.96.0.10', OLD, [
        { port: 80, nodePort: 0 },
        { port: 81, nodePort: 0 },
      ]),
    ]);
    assert.equal(portOf(out, 'default/old:80/TCP').healthCheckNodePort, 32000);
    assert.equal(portOf(out, 'default/old:81/TCP').healthCheckNodePort, 32000, 'shared by its own ports');
    const loser = portOf(out, 'default/new:80/TCP');
    assert.equal(loser.healthCheckNodePort, 0);
    assert.equal(loser.nodePort, 31080, 'its node port stays');
    assert.deepEqual(
      out.problems.map((p) => `${p.object}: ${p.reason}`),
      [
        'Service default/new: health check node port 32000 is already the health check node port of Service default/old, older; default/new:80/TCP goes without it',
      ],
    );
  });

  it('the ModelCache gives it back to the newer Service in the update that deletes the older', () => {
    const cache = new ModelCache(options());
    const old = decoded(local('old', '10.96.0.10', OLD));
    cache.setService(old);
    cache.setService(decoded(local('new', '10.96.0.20', NEW)));
    const first = cache.update();
    assert.equal(first.state.IPv4!.servicePorts.get('default/new:80/TCP')!.healthCheckNodePort, 0);
    assert.equal(first.problems.length, 1);
    cache.deleteService(old);
    const next = cache.update();
    assert.deepEqual([...next.changed].sort(), ['default/new:80/TCP', 'default/old:80/TCP']);
    assert.equal(next.state.IPv4!.servicePorts.get('default/new:80/TCP')!.healthCheckNodePort, 32000);
    assert.deepEqual(next.problems, []);
  });
});
