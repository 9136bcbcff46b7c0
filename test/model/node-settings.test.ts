import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Problem } from '../../contract/base/problem.ts';
import type { Node } from '../../src/kube/objects.ts';
import {
  nodeSettingsByFamily,
  type ProxyOptions,
  servesLocalhostNodePorts,
} from '../../src/model/node-settings.ts';
import { node, options, THIS_NODE } from './fixtures.ts';

function settings(overrides: Partial<ProxyOptions>, thisNode?: Node) {
  const problems: Problem[] = [];
  const result = nodeSettingsByFamily(options(overrides), thisNode, problems);
  return { ...result, problems };
}

describe('node IPs and families', () => {
  it('serves only IPv4 for IPv4 node IPs', () => {
    const got = settings({ nodeIPs: ['192.168.0.1'] });
    assert.deepEqual(got.IPv4?.nodeIPs, ['192.168.0.1']);
    assert.equal(got.IPv6, undefined);
  });

  it('serves both families for node IPs of both, keeping each family’s order', () => {
    const got = settings({ nodeIPs: ['FD00::0001', '192.168.0.1', '192.168.0.2'] });
    assert.deepEqual(got.IPv4?.nodeIPs, ['192.168.0.1', '192.168.0.2']);
    assert.deepEqual(got.IPv6?.nodeIPs, ['fd00::1']);
  });

  it('takes node IPs from the Node object, InternalIP before ExternalIP, when no flag gives them', () => {
    const thisNode = node(THIS_NODE, {
      externalIPs: ['203.0.113.1'],
      internalIPs: ['192.168.0.1', 'fd00::1'],
    });
    const got = settings({ nodeIPs: [] }, thisNode);
    assert.deepEqual(got.IPv4?.nodeIPs, ['192.168.0.1', '203.0.113.1']);
    assert.deepEqual(got.IPv6?.nodeIPs, ['fd00::1']);
  });

  it('prefers flags over the Node object', () => {
    const got = settings(
      { nodeIPs: ['10.0.0.1'] },
      node(THIS_NODE, { internalIPs: ['192.168.0.1', 'fd00::1'] }),
    );
    assert.deepEqual(got.IPv4?.nodeIPs, ['10.0.0.1']);
    assert.equal(got.IPv6, undefined);
  });

  it('falls back to an IPv4-only state with no node IP when none is known', () => {
    const got = settings({ nodeIPs: [] });
    assert.deepEqual(got.IPv4?.nodeIPs, []);
    assert.equal(got.IPv6, undefined);
  });

  it('reports an invalid node IP flag', () => {
    const got = settings({ nodeIPs: ['192.168.0.300'] });
    assert.deepEqual(got.problems, [
      { object: 'kproxy options', reason: 'nodeIPs[0]: "192.168.0.300" is not an IP address' },
    ]);
  });

  it('copies name, masquerade settings and the node name', () => {
    const got = settings({ masqueradeAll: true, masqueradeBit: 10 });
    assert.equal(got.IPv4?.nodeName, THIS_NODE);
    assert.equal(got.IPv4?.masqueradeAll, true);
    assert.equal(got.IPv4?.masqueradeBit, 10);
  });
});

describe('local traffic detection', () => {
  const DUAL = { nodeIPs: ['192.168.0.1', 'fd00::1'] };

  it('ClusterCIDR splits the cluster CIDRs by family', () => {
    const got = settings({ ...DUAL, clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/56'] });
    assert.deepEqual(got.IPv4?.localDetector, { mode: 'ClusterCIDR', cidrs: ['10.244.0.0/16'] });
    assert.deepEqual(got.IPv6?.localDetector, { mode: 'ClusterCIDR', cidrs: ['fd00:244::/56'] });
  });

  it('ClusterCIDR without a CIDR of the family detects nothing for it', () => {
    const got = settings({ ...DUAL, clusterCIDRs: ['10.244.0.0/16'] });
    assert.deepEqual(got.IPv6?.localDetector, { mode: 'None' });
  });

  it('NodeCIDR uses the Node object’s pod CIDRs', () => {
    const thisNode = node(THIS_NODE, { podCIDRs: ['10.244.1.0/24', 'fd00:244:0:1::/64'] });
    const got = settings({ ...DUAL, detectLocalMode: 'NodeCIDR' }, thisNode);
    assert.deepEqual(got.IPv4?.localDetector, { mode: 'NodeCIDR', cidrs: ['10.244.1.0/24'] });
    assert.deepEqual(got.IPv6?.localDetector, { mode: 'NodeCIDR', cidrs: ['fd00:244:0:1::/64'] });
  });

  it('NodeCIDR without a Node object is reported and detects nothing', () => {
    const got = settings({ detectLocalMode: 'NodeCIDR' });
    assert.deepEqual(got.IPv4?.localDetector, { mode: 'None' });
    assert.match(got.problems[0]?.reason ?? '', /detectLocalMode NodeCIDR/);
  });

  it('BridgeInterface and InterfaceNamePrefix carry the interface names', () => {
    assert.deepEqual(
      settings({ detectLocalMode: 'BridgeInterface', bridgeInterface: 'cbr0' }).IPv4?.localDetector,
      {
        mode: 'BridgeInterface',
        interfaces: ['cbr0'],
      },
    );
    assert.deepEqual(
      settings({ detectLocalMode: 'InterfaceNamePrefix', interfaceNamePrefix: 'veth' }).IPv4?.localDetector,
      {
        mode: 'InterfaceNamePrefix',
        prefixes: ['veth'],
      },
    );
  });

  it('reports an invalid cluster CIDR', () => {
    const got = settings({ clusterCIDRs: ['10.244.0.0/33'] });
    assert.deepEqual(got.problems, [
      { object: 'kproxy options', reason: 'clusterCIDRs[0]: "10.244.0.0/33" is not a CIDR' },
    ]);
  });
});

describe('nodePortAddresses', () => {
  it('means every local address when empty', () => {
    assert.equal(settings({ nodePortAddresses: [] }).IPv4?.nodePortAddresses, 'all');
  });

  it('gives each family its own CIDRs, and "all" to a family with none', () => {
    const got = settings({
      nodeIPs: ['192.168.0.1', 'fd00::1'],
      nodePortAddresses: ['192.168.0.0/24', '10.1.2.3/8'],
    });
    assert.deepEqual(got.IPv4?.nodePortAddresses, ['192.168.0.0/24', '10.0.0.0/8']);
    assert.equal(got.IPv6?.nodePortAddresses, 'all');
  });

  it('"primary" is the family’s primary node IP as a host CIDR', () => {
    const got = settings({
      nodeIPs: ['192.168.0.1', '192.168.0.2', 'fd00::1'],
      nodePortAddresses: ['primary'],
    });
    assert.deepEqual(got.IPv4?.nodePortAddresses, ['192.168.0.1/32']);
    assert.deepEqual(got.IPv6?.nodePortAddresses, ['fd00::1/128']);
  });

  it('"primary" combines with CIDRs (kube-proxy 1.37), and "all" is every local address', () => {
    const got = settings({
      nodeIPs: ['192.168.0.1', 'fd00::1'],
      nodePortAddresses: ['primary', '10.9.0.0/16', 'fd00:9::/64'],
    });
    assert.deepEqual(got.IPv4?.nodePortAddresses, ['192.168.0.1/32', '10.9.0.0/16']);
    assert.deepEqual(got.IPv6?.nodePortAddresses, ['fd00::1/128', 'fd00:9::/64']);
    assert.deepEqual(got.problems, []);
    assert.equal(settings({ nodePortAddresses: ['primary', 'all'] }).IPv4?.nodePortAddresses, 'all');
  });

  it('a zero CIDR means every local address', () => {
    assert.equal(
      settings({ nodePortAddresses: ['192.168.0.0/24', '0.0.0.0/0'] }).IPv4?.nodePortAddresses,
      'all',
    );
  });

  it('reports an entry that is neither a CIDR nor "primary"', () => {
    const got = settings({ nodePortAddresses: ['192.168.0.1'] });
    assert.match(got.problems[0]?.reason ?? '', /^nodePortAddresses\[0\]: "192.168.0.1" is not a CIDR/);
  });

  it('"localhost" is each family’s loopback range (kube-proxy 1.37, kubernetes#138427)', () => {
    const got = settings({
      nodeIPs: ['192.168.0.1', 'fd00::1'],
      nodePortAddresses: ['primary', 'localhost'],
    });
    assert.deepEqual(got.IPv4?.nodePortAddresses, ['192.168.0.1/32', '127.0.0.0/8']);
    assert.deepEqual(got.IPv6?.nodePortAddresses, ['fd00::1/128', '::1/128']);
    assert.deepEqual(got.problems, []);
  });
});

describe('localhost node ports (kube-proxy iptables: IPv4 only, where nodePortAddresses hold 127.0.0.1)', () => {
  const dualStack = ['192.168.0.1', 'fd00::1'];
  const serves = (nodePortAddresses: string[], localhostNodePorts = true) => {
    const got = settings({ nodeIPs: dualStack, nodePortAddresses, localhostNodePorts });
    return [got.IPv4?.localhostNodePorts, got.IPv6?.localhostNodePorts];
  };

  it('are served on every local address (the iptables default), never for IPv6', () => {
    assert.deepEqual(serves([]), [true, false]);
    assert.deepEqual(serves(['all']), [true, false]);
  });

  it('follow the CIDRs: 127.0.0.1 in one of them, or "localhost"', () => {
    assert.deepEqual(serves(['localhost']), [true, false]);
    assert.deepEqual(serves(['127.0.0.1/32', '::1/128']), [true, false]);
    assert.deepEqual(serves(['primary']), [false, false]);
    assert.deepEqual(serves(['192.168.0.0/24']), [false, false]);
  });

  it('are off with the option off, whatever the addresses', () => {
    assert.deepEqual(serves([], false), [false, false]);
    assert.deepEqual(serves(['localhost'], false), [false, false]);
  });

  it("are counted in kube-proxy's nfacct counter where it exists, and only where they are served", () => {
    const counted = (nodePortAddresses: string[], localhostNodePortsCounter: boolean) => {
      const options = {
        nodeIPs: dualStack,
        nodePortAddresses,
        localhostNodePorts: true,
        localhostNodePortsCounter,
      };
      const got = settings(options);
      return [got.IPv4?.localhostNodePortsCounted, got.IPv6?.localhostNodePortsCounted];
    };
    assert.deepEqual(counted([], true), [true, undefined]);
    assert.deepEqual(counted([], false), [undefined, undefined], 'no counter in the kernel');
    assert.deepEqual(counted(['primary'], true), [undefined, undefined], 'not served');
  });

  it('decide route_localnet at start, before the node IPs are known', () => {
    const at = (nodePortAddresses: string[], localhostNodePorts = true) =>
      servesLocalhostNodePorts(options({ nodeIPs: [], nodePortAddresses, localhostNodePorts }));
    assert.equal(at([]), true);
    assert.equal(at(['primary', 'localhost']), true);
    assert.equal(at(['primary']), false, 'the primary IP is not known yet, and never loopback');
    assert.equal(at(['10.0.0.0/8']), false);
    assert.equal(at([], false), false);
  });
});
