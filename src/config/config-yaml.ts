// The effective configuration as a KubeProxyConfiguration (v1alpha1) YAML document, as kube-proxy's
// --write-config-to writes it: every field kproxy reads, defaults filled in, keys in alphabetical
// order (kind among them: kube-proxy encodes through JSON, and sigs.k8s.io/yaml sorts map keys),
// durations in Go's form. kproxy's own
// settings (nodeIPs, fullSyncPeriod) are written too, so the file reads back to the same config.
import { stringify } from 'yaml';
import type { ProxyConfig, RuleModeConfig } from './config.ts';
import { CONFIG_API_VERSION, CONFIG_KIND } from './config-file.ts';
import { formatGoDuration } from './go-duration.ts';

export function configYaml(config: ProxyConfig): string {
  const ruleMode = (section: RuleModeConfig) => ({
    masqueradeAll: section.masqueradeAll,
    masqueradeBit: section.masqueradeBit,
    minSyncPeriod: formatGoDuration(section.minSyncPeriodMs),
    syncPeriod: formatGoDuration(section.syncPeriodMs),
  });
  const document = {
    apiVersion: CONFIG_API_VERSION,
    kind: CONFIG_KIND,
    bindAddress: config.bindAddress,
    clientConnection: {
      burst: config.clientConnection.burst,
      kubeconfig: config.clientConnection.kubeconfig,
      qps: config.clientConnection.qps,
    },
    clusterCIDR: config.clusterCIDRs.join(','),
    conntrack: {
      maxPerCore: config.conntrack.maxPerCore,
      min: config.conntrack.min,
      tcpBeLiberal: config.conntrack.tcpBeLiberal,
      tcpCloseWaitTimeout: formatGoDuration(config.conntrack.tcpCloseWaitTimeoutMs),
      tcpEstablishedTimeout: formatGoDuration(config.conntrack.tcpEstablishedTimeoutMs),
      udpStreamTimeout: formatGoDuration(config.conntrack.udpStreamTimeoutMs),
      udpTimeout: formatGoDuration(config.conntrack.udpTimeoutMs),
    },
    detectLocal: config.detectLocal,
    detectLocalMode: config.detectLocalMode,
    fullSyncPeriod: formatGoDuration(config.fullSyncPeriodMs),
    healthzBindAddress: config.healthzBindAddress,
    hostnameOverride: config.hostnameOverride,
    iptables: { ...ruleMode(config.iptables), localhostNodePorts: config.iptables.localhostNodePorts },
    ipvs: {
      excludeCIDRs: config.ipvs.excludeCIDRs,
      minSyncPeriod: formatGoDuration(config.ipvs.minSyncPeriodMs),
      scheduler: config.ipvs.scheduler,
      strictARP: config.ipvs.strictARP,
      syncPeriod: formatGoDuration(config.ipvs.syncPeriodMs),
      tcpFinTimeout: formatGoDuration(config.ipvs.tcpFinTimeoutMs),
      tcpTimeout: formatGoDuration(config.ipvs.tcpTimeoutMs),
      udpTimeout: formatGoDuration(config.ipvs.udpTimeoutMs),
    },
    logging: { format: config.logging.format, verbosity: config.logging.verbosity },
    metricsBindAddress: config.metricsBindAddress,
    mode: config.mode,
    nftables: ruleMode(config.nftables),
    nodeIPs: config.nodeIPs,
    nodePortAddresses: config.nodePortAddresses,
    oomScoreAdj: config.oomScoreAdj,
  };
  return stringify(document, { sortMapEntries: true });
}
