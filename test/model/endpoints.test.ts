import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { categorizeEndpoints } from '../../src/model/endpoint-selection.ts';
import {
  type PortCandidates,
  portCandidates,
  type SliceEndpoints,
  sliceEndpoints,
  slicePorts,
  slicePortsByKey,
} from '../../src/model/endpoints.ts';

/** The candidates of the http/TCP port of these slices. */
function httpCandidates(slices: readonly SliceEndpoints[]): PortCandidates {
  return portCandidates(slicePortsByKey(slices, 'IPv4').get('http/TCP')!);
}

import { addresses, build, endpoint, portOf, service, slice, THIS_NODE } from './fixtures.ts';

const WEB = 'default/web:80/TCP';

describe('endpoints of a service port', () => {
  it('collects endpoints from every slice of the service', () => {
    const out = build([
      service('web'),
      slice('web', [endpoint('10.244.1.5')], { name: 'web-aaaaa' }),
      slice('web', [endpoint('10.244.2.5')], { name: 'web-bbbbb' }),
    ]);
    assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), ['10.244.1.5:8080', '10.244.2.5:8080']);
  });

  it('ignores slices of another service or namespace', () => {
    const out = build([
      service('web'),
      slice('api', [endpoint('10.244.1.5')]),
      slice('web', [endpoint('10.244.2.5')], { namespace: 'other' }),
    ]);
    assert.equal(portOf(out, WEB).hasEndpoints, false);
  });

  it('matches slice ports to service ports by name, using the slice port number', () => {
    const svc = service('web', {
      ports: [
        { name: 'http', port: 80 },
        { name: 'metrics', port: 9090 },
      ],
    });
    const out = build([
      svc,
      slice('web', [endpoint('10.244.1.5')], {
        ports: [
          { name: 'metrics', port: 19090, protocol: 'TCP' },
          { name: 'http', port: 8080, protocol: 'TCP' },
        ],
      }),
    ]);
    assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), ['10.244.1.5:8080']);
    assert.deepEqual(addresses(portOf(out, 'default/web:9090/TCP').clusterEndpoints), ['10.244.1.5:19090']);
  });

  it('matches an unnamed service port to an unnamed slice port', () => {
    const out = build([
      service('web', { ports: [{ port: 80 }] }),
      slice('web', [endpoint('10.244.1.5')], { ports: [{ name: '', port: 8080, protocol: 'TCP' }] }),
    ]);
    assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), ['10.244.1.5:8080']);
  });

  it('does not match a slice port of the same name but another protocol', () => {
    const out = build([
      service('web'),
      slice('web', [endpoint('10.244.1.5')], { ports: [{ name: 'http', port: 8080, protocol: 'UDP' }] }),
    ]);
    assert.equal(portOf(out, WEB).hasEndpoints, false);
  });

  it('ignores a slice port without a name, and says so, as kube-proxy does', () => {
    const out = build([
      service('web', { ports: [{ port: 80 }] }),
      slice('web', [endpoint('10.244.1.5')], { ports: [{ port: 8080 }] }),
    ]);
    assert.equal(portOf(out, WEB).hasEndpoints, false);
    assert.deepEqual(out.problems, [
      {
        object: 'EndpointSlice default/web-abc12',
        reason: 'ports[0].name: missing, so the port is ignored (an unnamed port has name "")',
      },
    ]);
  });

  it('ignores slice ports without a port number', () => {
    const out = build([
      service('web'),
      slice('web', [endpoint('10.244.1.5')], { ports: [{ name: 'http' }] }),
    ]);
    assert.equal(portOf(out, WEB).hasEndpoints, false);
  });

  it('deduplicates an endpoint listed in two slices', () => {
    const out = build([
      service('web'),
      slice('web', [endpoint('10.244.1.5')], { name: 'web-aaaaa' }),
      slice('web', [endpoint('10.244.1.5')], { name: 'web-bbbbb' }),
    ]);
    assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), ['10.244.1.5:8080']);
  });

  it('prefers the non-terminating copy of a duplicated ip:port whatever the slice order', () => {
    const terminating = endpoint('10.244.1.5', { ready: false, serving: true, terminating: true });
    const running = endpoint('10.244.1.5', { ready: true });
    for (const [first, second] of [
      [terminating, running],
      [running, terminating],
    ]) {
      const out = build([
        service('web'),
        slice('web', [first!], { name: 'web-aaaaa' }),
        slice('web', [second!], { name: 'web-bbbbb' }),
      ]);
      const eps = portOf(out, WEB).clusterEndpoints;
      assert.equal(eps.length, 1);
      assert.equal(eps.at(0)!.terminating, false);
      assert.equal(eps.at(0)!.ready, true);
    }
  });

  it('prefers the ready copy of a duplicated ip:port that is terminating in neither slice', () => {
    const starting = endpoint('10.244.1.5', { ready: false });
    const running = endpoint('10.244.1.5', { ready: true });
    for (const [first, second] of [
      [starting, running],
      [running, starting],
    ]) {
      const out = build([
        service('web'),
        slice('web', [first!], { name: 'web-aaaaa' }),
        slice('web', [second!], { name: 'web-bbbbb' }),
      ]);
      assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), ['10.244.1.5:8080']);
    }
  });

  it('sorts endpoints by ip then port', () => {
    const out = build([
      service('web'),
      slice('web', [endpoint('10.244.2.1'), endpoint('10.244.10.1'), endpoint('10.244.1.9')], {
        name: 'web-a',
      }),
    ]);
    assert.deepEqual(addresses(portOf(out, WEB).clusterEndpoints), [
      '10.244.1.9:8080',
      '10.244.10.1:8080',
      '10.244.2.1:8080',
    ]);
  });

  it('uses only slices of the state’s address family', () => {
    const svc = service('web', { clusterIPs: ['10.96.0.10', 'fd00:96::10'] });
    const out = build(
      [
        svc,
        slice('web', [endpoint('10.244.1.5')], { name: 'web-v4' }),
        slice('web', [endpoint('fd00:244::5')], { name: 'web-v6' }),
      ],
      {
        nodeIPs: ['192.168.0.1', 'fd00::1'],
      },
    );
    assert.deepEqual(addresses(portOf(out, WEB, 'IPv4').clusterEndpoints), ['10.244.1.5:8080']);
    assert.deepEqual(addresses(portOf(out, WEB, 'IPv6').clusterEndpoints), ['[fd00:244::5]:8080']);
  });

  it('marks endpoints on this node as local', () => {
    const out = build([
      service('web'),
      slice('web', [
        endpoint('10.244.1.5', { nodeName: THIS_NODE }),
        endpoint('10.244.2.5', { nodeName: 'node-2' }),
      ]),
    ]);
    assert.deepEqual(
      portOf(out, WEB).clusterEndpoints.map((ep) => ep.isLocal),
      [true, false],
    );
  });

  it('ignores slices labelled for another proxy or as headless', () => {
    const cases: Record<string, string>[] = [
      { 'service.kubernetes.io/service-proxy-name': 'x' },
      { 'service.kubernetes.io/headless': '' },
    ];
    for (const labels of cases) {
      const out = build([service('web'), slice('web', [endpoint('10.244.1.5')], { labels })]);
      assert.equal(portOf(out, WEB).hasEndpoints, false);
    }
  });

  it('reports a slice without a service-name label and ignores it', () => {
    const orphan = slice('web', [endpoint('10.244.1.5')]);
    const unlabelled = { ...orphan, metadata: { ...orphan.metadata, labels: {} } };
    const out = build([service('web'), unlabelled]);
    assert.equal(portOf(out, WEB).hasEndpoints, false);
    assert.deepEqual(
      out.problems.map((p) => p.object),
      ['EndpointSlice default/web-abc12'],
    );
    assert.match(out.problems[0]!.reason, /kubernetes\.io\/service-name/);
  });
});

describe('endpoint conditions', () => {
  const cases = [
    { what: 'all nil', given: {}, want: { ready: true, serving: true, terminating: false } },
    {
      what: 'all null',
      given: { ready: null, serving: null, terminating: null },
      want: { ready: true, serving: true, terminating: false },
    },
    {
      what: 'not ready, serving nil',
      given: { ready: false },
      want: { ready: false, serving: true, terminating: false },
    },
    {
      what: 'not ready, serving nil, terminating',
      given: { ready: false, terminating: true },
      want: { ready: false, serving: true, terminating: true },
    },
    {
      what: 'explicit values',
      given: { ready: true, serving: false, terminating: false },
      want: { ready: true, serving: false, terminating: false },
    },
  ];
  for (const { what, given, want } of cases) {
    it(`applies kube-proxy's nil defaults: ${what}`, () => {
      const record = sliceEndpoints(
        slice('web', [endpoint('10.244.1.5', given)]),
        'default/web',
        THIS_NODE,
        [],
      );
      const [candidate] = httpCandidates([record]).candidates;
      const { ready, serving, terminating } = candidate!.endpoint;
      assert.deepEqual({ ready, serving, terminating }, want);
    });
  }
});

describe("a slice's record", () => {
  it('lists endpoints in address order, one per address, keeping the copy that is not terminating', () => {
    const record = sliceEndpoints(
      slice('web', [
        endpoint('10.244.2.5'),
        endpoint('10.244.1.5', { ready: false, serving: true, terminating: true }),
        endpoint('10.244.10.5'),
        endpoint('10.244.1.5', { nodeName: THIS_NODE }),
      ]),
      'default/web',
      THIS_NODE,
      [],
    );
    const [port] = slicePorts(record);
    assert.deepEqual(
      port!.endpoints.map((e) => [e.ip, e.port, e.isLocal, e.terminating]),
      [
        ['10.244.1.5', 8080, true, false],
        ['10.244.10.5', 8080, false, false],
        ['10.244.2.5', 8080, false, false],
      ],
    );
  });

  it('is the endpoint list of a port it alone serves, when every endpoint is used (no copy per port)', () => {
    const one = build([service('web'), slice('web', [endpoint('10.244.2.5'), endpoint('10.244.1.5')])]);
    const record = sliceEndpoints(
      slice('web', [endpoint('10.244.2.5'), endpoint('10.244.1.5')]),
      'default/web',
      THIS_NODE,
      [],
    );
    const found = httpCandidates([record]);
    assert.equal(found.whole, slicePorts(record)[0]!.endpoints);
    const selection = categorizeEndpoints(found, portOf(one, WEB), THIS_NODE, '');
    assert.equal(selection.clusterEndpoints, slicePorts(record)[0]!.endpoints);
    assert.deepEqual(addresses(selection.clusterEndpoints), ['10.244.1.5:8080', '10.244.2.5:8080']);

    const other = sliceEndpoints(
      slice('web', [endpoint('10.244.3.5')], { name: 'web-zzzzz' }),
      'default/web',
      THIS_NODE,
      [],
    );
    assert.equal(httpCandidates([record, other]).whole, undefined, 'two slices: a new list');
  });
});
