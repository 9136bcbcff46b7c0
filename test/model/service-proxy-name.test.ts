// --service-proxy-name (issue 29): kproxy serves only the Services (and their slices) labelled
// service.kubernetes.io/service-proxy-name=NAME, the ones kube-proxy leaves alone; without it,
// kube-proxy's selection. Both the one-shot build (render) and the daemon's ModelCache.
import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import type { ServicePort } from '../../contract/proxy-state.ts';
import { parseFlags } from '../../src/cli/parse-flags.ts';
import { loadProxyConfig } from '../../src/config/config.ts';
import { PROXY_FLAG_OPTIONS } from '../../src/config/proxy-flags.ts';
import { toProxyOptions } from '../../src/config/proxy-options.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, KubeObject, Service } from '../../src/kube/objects.ts';
import { HANDOVER_LABEL as HANDOVER } from '../../src/kube/objects.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { proxyNameProblem } from '../../src/model/proxy-labels.ts';
import { build, endpoint, options, service, slice } from './fixtures.ts';

const PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
const named = (value: string) => ({ labels: { [PROXY_NAME]: value } });

/** Four Services with one endpoint each: unlabelled, for kproxy, for another proxy, for "" (any proxy). */
const OBJECTS: readonly KubeObject[] = [
  service('plain', { clusterIP: '10.96.0.1' }),
  slice('plain', [endpoint('10.244.1.1')]),
  service('moved', { clusterIP: '10.96.0.2' }, named('kproxy')),
  slice('moved', [endpoint('10.244.1.2')], named('kproxy')),
  service('other', { clusterIP: '10.96.0.3' }, named('cilium')),
  slice('other', [endpoint('10.244.1.3')], named('cilium')),
  service('empty', { clusterIP: '10.96.0.4' }, named('')),
  slice('empty', [endpoint('10.244.1.4')], named('')),
];

/** Served service ports with their endpoints, as "name → ip". */
function served(ports: ReadonlyMap<string, ServicePort> | undefined) {
  return [...(ports ?? new Map<string, ServicePort>()).entries()].map(
    ([key, port]) => `${key} → ${port.clusterEndpoints.map((e) => e.ip).join(',')}`,
  );
}

describe('which Services a proxy name selects', () => {
  it('without one, only the unlabelled Service (kube-proxy’s selection)', () => {
    assert.deepEqual(served(build(OBJECTS).state.IPv4?.servicePorts), ['default/plain:80/TCP → 10.244.1.1']);
  });

  it('with one, only the Service labelled with exactly that name, with its slice’s endpoints', () => {
    assert.deepEqual(served(build(OBJECTS, { serviceProxyName: 'kproxy' }).state.IPv4?.servicePorts), [
      'default/moved:80/TCP → 10.244.1.2',
    ]);
  });

  it('the daemon’s ModelCache selects the same, and a label moved either way moves the Service', () => {
    const cache = new ModelCache(options({ serviceProxyName: 'kproxy' }));
    for (const raw of OBJECTS) {
      const decoded = decodeObject(raw);
      assert.equal(decoded.kind, 'object');
      if (decoded.kind !== 'object') continue;
      if (decoded.object.kind === 'Service') cache.setService(decoded.object as Service);
      else cache.setEndpointSlice(decoded.object as EndpointSlice);
    }
    assert.deepEqual(served(cache.update().state.IPv4?.servicePorts), ['default/moved:80/TCP → 10.244.1.2']);
    // The operator moves "plain" to kproxy (Service and slice relabelled) and "moved" back.
    const relabel = (raw: KubeObject, labels: Record<string, string>) => {
      const decoded = decodeObject(raw);
      assert.equal(decoded.kind, 'object');
      const object = (decoded as { object: Service | EndpointSlice }).object;
      return {
        ...object,
        metadata: { ...object.metadata, labels: { ...object.metadata.labels, ...labels } },
      };
    };
    cache.setService(relabel(OBJECTS[0]!, { [PROXY_NAME]: 'kproxy' }) as Service);
    cache.setEndpointSlice(relabel(OBJECTS[1]!, { [PROXY_NAME]: 'kproxy' }) as EndpointSlice);
    const moved = decodeObject(OBJECTS[2]!) as { object: Service };
    cache.setService({ ...moved.object, metadata: { ...moved.object.metadata, labels: {} } });
    assert.deepEqual(served(cache.update().state.IPv4?.servicePorts), ['default/plain:80/TCP → 10.244.1.1']);
  });

  it('a Service labelled for a handover is served with the name, at every step of the move', () => {
    const cache = new ModelCache(options({ serviceProxyName: 'kproxy' }));
    // The slice keeps no proxy label throughout: the EndpointSlice controller copies the Service's
    // labels only later, and a slice is ours when its Service is.
    cache.setEndpointSlice(slice('web', [endpoint('10.244.1.9')]));
    const steps: [string, Record<string, string>, string[]][] = [
      ['kube-proxy’s alone', {}, []],
      ['handover added', { [HANDOVER]: 'kproxy' }, ['default/web:80/TCP → 10.244.1.9']],
      [
        'proxy name moved',
        { [HANDOVER]: 'kproxy', [PROXY_NAME]: 'kproxy' },
        ['default/web:80/TCP → 10.244.1.9'],
      ],
      ['handover removed', { [PROXY_NAME]: 'kproxy' }, ['default/web:80/TCP → 10.244.1.9']],
      [
        'back: handover added',
        { [HANDOVER]: 'kproxy', [PROXY_NAME]: 'kproxy' },
        ['default/web:80/TCP → 10.244.1.9'],
      ],
      ['back: proxy name removed', { [HANDOVER]: 'kproxy' }, ['default/web:80/TCP → 10.244.1.9']],
      ['back: handover removed', {}, []],
      ['a handover for another proxy', { [HANDOVER]: 'cilium' }, []],
    ];
    for (const [step, labels, want] of steps) {
      // Decoded as the informer decodes it: decoding keeps only the labels kproxy reads.
      const decoded = decodeObject(service('web', { clusterIP: '10.96.0.9' }, { labels }));
      assert.equal(decoded.kind, 'object');
      cache.setService((decoded as { object: Service }).object);
      assert.deepEqual(served(cache.update().state.IPv4?.servicePorts), want, step);
    }
  });

  it('without a name, the handover label changes nothing: kube-proxy’s selection', () => {
    const objects = [service('web', { clusterIP: '10.96.0.9' }, { labels: { [HANDOVER]: 'kproxy' } })];
    assert.deepEqual(
      served(build([...objects, slice('web', [endpoint('10.244.1.9')])]).state.IPv4?.servicePorts),
      ['default/web:80/TCP → 10.244.1.9'],
    );
    const claimed = slice('web', [endpoint('10.244.1.9')], named('cilium'));
    assert.deepEqual(served(build([...objects, claimed]).state.IPv4?.servicePorts), [
      'default/web:80/TCP → ',
    ]);
  });
});

test('a proxy name must be a label value', () => {
  for (const good of ['kproxy', 'k', 'kproxy-canary.v2', 'A_1'])
    assert.equal(proxyNameProblem(good), undefined, good);
  for (const bad of ['', '-kproxy', 'kproxy.', 'k/proxy', 'a'.repeat(64), 'k proxy']) {
    assert.match(proxyNameProblem(bad) ?? '', /not a label value/, bad);
  }
});

test('--service-proxy-name reaches the model’s options, also beside --config; a bad name is refused', async () => {
  const load = async (args: string[]) => {
    const flags = parseFlags(args, PROXY_FLAG_OPTIONS);
    assert.ok(flags.ok);
    return loadProxyConfig(flags.values, {
      hostname: 'node-1',
      readFile: async () => 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n',
    });
  };
  const withName = await load(['--config', 'c.yaml', '--service-proxy-name', 'kproxy']);
  assert.ok(withName.ok, withName.ok ? '' : withName.error);
  assert.equal(withName.config.serviceProxyName, 'kproxy');
  assert.equal(toProxyOptions(withName.config).serviceProxyName, 'kproxy');
  const without = await load([]);
  assert.ok(without.ok);
  assert.equal(toProxyOptions(without.config).serviceProxyName, undefined);
  const bad = await load(['--service-proxy-name', 'k/proxy']);
  assert.ok(!bad.ok);
  assert.match(bad.error, /service-proxy-name.*not a label value/);
});
