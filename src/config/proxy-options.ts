// ProxyConfig → the model's ProxyOptions: the node identity and traffic settings that
// buildProxyState needs.
import type { ProxyOptions } from '../model/build-state.ts';
import type { ProxyConfig } from './config.ts';

export function toProxyOptions(config: ProxyConfig): ProxyOptions {
  return {
    nodeName: config.nodeName,
    nodeIPs: config.nodeIPs,
    // kube-proxy runs without local-traffic detection when ClusterCIDR mode has no CIDR to use.
    detectLocalMode:
      config.detectLocalMode === 'ClusterCIDR' && config.clusterCIDRs.length === 0
        ? 'None'
        : config.detectLocalMode,
    clusterCIDRs: config.clusterCIDRs,
    serviceCIDRs: config.serviceCIDRs,
    ...(config.serviceProxyName ? { serviceProxyName: config.serviceProxyName } : {}),
    bridgeInterface: config.detectLocal.bridgeInterface || undefined,
    interfaceNamePrefix: config.detectLocal.interfaceNamePrefix || undefined,
    masqueradeAll: config.masqueradeAll,
    masqueradeBit: config.masqueradeBit,
    nodePortAddresses: config.nodePortAddresses,
    // Only kube-proxy's iptables proxier serves them (route_localnet); nftables and IPVS do not.
    localhostNodePorts: config.mode === 'iptables' && config.iptables.localhostNodePorts,
    // Render assumes a kernel with nfacct, as kube-proxy's proxier tests; kproxy run says whether
    // this one has it (daemon.ts).
    localhostNodePortsCounter: config.mode === 'iptables',
    invalidDropsCounter: config.mode === 'iptables',
    conntrackTCPLiberal: config.conntrack.tcpBeLiberal,
  };
}
