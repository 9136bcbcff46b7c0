// The service CIDRs reach each family's node settings: from ServiceCIDR objects when the cluster
// has any, else from the --service-cluster-ip-range option; the cache makes a change full.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeObject } from '../../src/kube/decode.ts';
import type { ServiceCIDR } from '../../src/kube/objects.ts';
import { buildProxyState } from '../../src/model/build-state.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { endpoint, options, service, slice } from './fixtures.ts';

function serviceCIDR(name: string, cidrs: string[]): ServiceCIDR {
  const raw = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'ServiceCIDR',
    metadata: { name },
    spec: { cidrs },
  };
  const result = decodeObject(raw);
  if (result.kind !== 'object' || result.object.kind !== 'ServiceCIDR') assert.fail(JSON.stringify(result));
  return result.object;
}

const dualStack = options({ nodeIPs: ['192.168.0.1', 'fd00::1'], serviceCIDRs: ['10.0.0.0/24'] });
const cidrsOf = (state: ReturnType<typeof buildProxyState>['state']) => ({
  IPv4: state.IPv4?.node.serviceCIDRs,
  IPv6: state.IPv6?.node.serviceCIDRs,
});

describe('service CIDRs', () => {
  it('come from every ServiceCIDR object, canonical, split by family, sorted; the option is then unused', () => {
    const objects = [
      serviceCIDR('extra', ['10.97.0.0/16']),
      serviceCIDR('kubernetes', ['10.96.0.1/12', 'FD00:96::/112']),
    ];
    const built = buildProxyState({ services: [], endpointSlices: [], serviceCIDRs: objects }, dualStack);
    assert.deepEqual(cidrsOf(built.state), {
      IPv4: ['10.96.0.0/12', '10.97.0.0/16'],
      IPv6: ['fd00:96::/112'],
    });
    assert.deepEqual(built.problems, []);
  });

  it('fall back to the option without any ServiceCIDR object; a bad one is a problem, not a crash', () => {
    const built = buildProxyState({ services: [], endpointSlices: [] }, dualStack);
    assert.deepEqual(cidrsOf(built.state), { IPv4: ['10.0.0.0/24'], IPv6: [] });
    const bad = buildProxyState(
      { services: [], endpointSlices: [] },
      options({ serviceCIDRs: ['10.0.0.0/33'] }),
    );
    assert.deepEqual(bad.state.IPv4?.node.serviceCIDRs, []);
    assert.match(bad.problems.map((p) => p.reason).join(), /serviceCIDRs\[0\]: "10.0.0.0\/33" is not a CIDR/);
  });

  it('in the cache: a change re-plans everything, an object that changes nothing does not', () => {
    const cache = new ModelCache(dualStack);
    cache.setService(service('web'));
    cache.setEndpointSlice(slice('web', [endpoint('10.244.1.1')]));
    const first = cache.update();
    assert.deepEqual(cidrsOf(first.state), { IPv4: ['10.0.0.0/24'], IPv6: [] });

    assert.equal(cache.setServiceCIDR(serviceCIDR('kubernetes', ['10.96.0.0/12'])), true);
    const replaced = cache.update();
    assert.equal(replaced.full, true);
    assert.deepEqual(cidrsOf(replaced.state), { IPv4: ['10.96.0.0/12'], IPv6: [] });
    // The same as building from scratch.
    const objects = { services: [service('web')], endpointSlices: [slice('web', [endpoint('10.244.1.1')])] };
    const kubernetes = serviceCIDR('kubernetes', ['10.96.0.0/12']);
    assert.deepEqual(
      replaced.state,
      buildProxyState({ ...objects, serviceCIDRs: [kubernetes] }, dualStack).state,
    );

    // A second object holding the same range changes nothing: no full sync for it.
    assert.equal(cache.setServiceCIDR(serviceCIDR('copy', ['10.96.0.0/12'])), false);
    assert.equal(cache.update().full, false);

    assert.equal(cache.deleteServiceCIDR(kubernetes), false);
    assert.equal(cache.deleteServiceCIDR(serviceCIDR('copy', [])), true);
    assert.deepEqual(cidrsOf(cache.update().state), { IPv4: ['10.0.0.0/24'], IPv6: [] });
  });
});
