import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveProxyConfig } from '../../src/config/config.ts';
import type { Settings } from '../../src/config/config-file.ts';
import { toProxyOptions } from '../../src/config/proxy-options.ts';

function configWith(settings: Record<string, string | number | boolean | string[]>) {
  const result = resolveProxyConfig(new Map(Object.entries(settings)) as Settings, 'host-1');
  assert.ok(result.ok, !result.ok ? result.error.message : '');
  return result.config;
}

test('the node identity and traffic settings reach the model', () => {
  const options = toProxyOptions(
    configWith({
      mode: 'iptables',
      hostnameOverride: 'node-1',
      nodeIPs: ['192.168.10.11'],
      clusterCIDR: ['10.244.0.0/16'],
      serviceClusterIPRange: ['10.96.0.0/12', 'fd00:10:96::/112'],
      masqueradeAll: true,
      'iptables.masqueradeBit': 3,
      nodePortAddresses: ['primary'],
    }),
  );
  assert.deepEqual(options, {
    nodeName: 'node-1',
    nodeIPs: ['192.168.10.11'],
    detectLocalMode: 'ClusterCIDR',
    clusterCIDRs: ['10.244.0.0/16'],
    serviceCIDRs: ['10.96.0.0/12', 'fd00:10:96::/112'],
    bridgeInterface: undefined,
    interfaceNamePrefix: undefined,
    masqueradeAll: true,
    masqueradeBit: 3,
    nodePortAddresses: ['primary'],
    localhostNodePorts: true,
    localhostNodePortsCounter: true,
    invalidDropsCounter: true,
    conntrackTCPLiberal: false,
  });
});

test('localhost node ports reach the model in iptables mode only (kube-proxy serves them nowhere else)', () => {
  assert.equal(toProxyOptions(configWith({ mode: 'iptables' })).localhostNodePorts, true);
  const off = configWith({ mode: 'iptables', 'iptables.localhostNodePorts': false });
  assert.equal(toProxyOptions(off).localhostNodePorts, false);
  assert.equal(toProxyOptions(configWith({ mode: 'nftables' })).localhostNodePorts, false);
  assert.equal(toProxyOptions(configWith({ mode: 'ipvs' })).localhostNodePorts, false);
});

test("render assumes kube-proxy's nfacct counters in iptables mode (kproxy run says whether they exist)", () => {
  const iptables = toProxyOptions(configWith({ mode: 'iptables' }));
  assert.equal(iptables.localhostNodePortsCounter, true);
  assert.equal(iptables.invalidDropsCounter, true);
  const nftables = toProxyOptions(configWith({ mode: 'nftables' }));
  assert.equal(nftables.localhostNodePortsCounter, false);
  assert.equal(nftables.invalidDropsCounter, false);
});

test('a liberal conntrack (--conntrack-tcp-be-liberal) reaches the model, which then keeps INVALID packets', () => {
  assert.equal(toProxyOptions(configWith({ 'conntrack.tcpBeLiberal': true })).conntrackTCPLiberal, true);
  assert.equal(toProxyOptions(configWith({})).conntrackTCPLiberal, false);
});

test('ClusterCIDR detection without a cluster CIDR means no local-traffic detection (as kube-proxy)', () => {
  assert.equal(toProxyOptions(configWith({})).detectLocalMode, 'None');
});

test('bridge and prefix detection carry their interface settings', () => {
  const bridge = toProxyOptions(
    configWith({ detectLocalMode: 'BridgeInterface', 'detectLocal.bridgeInterface': 'cbr0' }),
  );
  assert.equal(bridge.detectLocalMode, 'BridgeInterface');
  assert.equal(bridge.bridgeInterface, 'cbr0');
  const prefix = toProxyOptions(
    configWith({ detectLocalMode: 'InterfaceNamePrefix', 'detectLocal.interfaceNamePrefix': 'veth' }),
  );
  assert.equal(prefix.interfaceNamePrefix, 'veth');
});

test('the default mode is nftables, and its section holds the masquerade settings', () => {
  const config = configWith({ 'nftables.masqueradeBit': 5 });
  assert.equal(config.mode, 'nftables');
  assert.equal(toProxyOptions(config).masqueradeBit, 5);
});
