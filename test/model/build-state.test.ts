import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { build, endpoint, service, slice } from './fixtures.ts';

describe('buildProxyState', () => {
  it('yields an empty state for a configured family without services', () => {
    const out = build([], { nodeIPs: ['192.168.0.1', 'fd00::1'] });
    assert.equal(out.state.IPv4?.servicePorts.size, 0);
    assert.equal(out.state.IPv6?.servicePorts.size, 0);
    assert.equal(out.state.IPv6?.family, 'IPv6');
  });

  it('has no state for a family the node is not configured for, even with services of it', () => {
    const out = build([service('web', { clusterIP: 'fd00:96::10' })], { nodeIPs: ['192.168.0.1'] });
    assert.equal(out.state.IPv6, undefined);
    assert.equal(out.state.IPv4?.servicePorts.size, 0);
  });

  it('keeps service ports in key order whatever the input order', () => {
    const names = ['zeta', 'alpha', 'mid'];
    const out = build(names.map((name) => service(name)));
    assert.deepEqual(
      [...out.state.IPv4!.servicePorts.keys()],
      ['default/alpha:80/TCP', 'default/mid:80/TCP', 'default/zeta:80/TCP'],
    );
  });

  it('gives the same state for the same objects in any order', () => {
    const objects = [
      service('web'),
      service('api', { clusterIP: '10.96.0.11' }),
      slice('web', [endpoint('10.244.1.1'), endpoint('10.244.1.2', { ready: false })], { name: 'web-a' }),
      slice('web', [endpoint('10.244.1.1', { ready: false, serving: true, terminating: true })], {
        name: 'web-b',
      }),
      slice('api', [endpoint('10.244.3.1')]),
    ];
    const forward = build(objects);
    const backward = build([...objects].reverse());
    assert.deepEqual(
      [...forward.state.IPv4!.servicePorts.entries()],
      [...backward.state.IPv4!.servicePorts.entries()],
    );
  });

  it('reports a service that appears twice and uses the first', () => {
    const out = build([
      service('web', { clusterIP: '10.96.0.10' }),
      service('web', { clusterIP: '10.96.0.99' }),
    ]);
    assert.equal(out.state.IPv4!.servicePorts.get('default/web:80/TCP')?.clusterIP, '10.96.0.10');
    assert.deepEqual(out.problems, [
      { object: 'Service default/web', reason: 'appears more than once; the first one is used' },
    ]);
  });

  it('reports nothing for a clean cluster', () => {
    assert.deepEqual(build([service('web'), slice('web', [endpoint('10.244.1.1')])]).problems, []);
  });
});
