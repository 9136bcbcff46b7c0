// The Services of the IPVS takeover VM tests (kube-proxy-ipvs-takeover.vmtest.ts), shared with the
// node agent that runs kproxy's dataplanes in the node's namespace (takeover-agent.ts). Two sets:
// `takeover`, upstream's TestNodePortIPv4 addresses, a TCP ClusterIP with a NodePort and a UDP
// ClusterIP beside, each with the two pods of the lab's node, and TestOnlyLocalNodePorts' NodePort
// with externalTrafficPolicy Local (at its own ClusterIP and NodePort: fixtures/kube-proxy/SOURCES.md),
// pod 1 its local endpoint and pod 0 one it is told runs on another node; `iptables` and
// `nftables`, the Services of kube-proxy's rules that carry traffic here (CIRCLE_SERVICES), for the
// circles that start from kube-proxy's iptables or nftables mode.

import type { ServicePort } from '../../../../contract/proxy-state.ts';
import { endpoint, ipv4, servicePort } from '../../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4 } from '../../../../harness/topology.ts';
import {
  KUBE_DNS_UDP as KUBE_DNS,
  LOCAL_POD,
  NFT_LOCAL_NODE_PORT,
  OVERALL,
  OVERALL_ETP_LOCAL,
  POD0,
  POD1,
  together,
} from '../../shared/kube-proxy-rule-sets.ts';

export { LOCAL_POD, POD0, POD1 };
export const TCP_CLUSTER_IP = '10.20.30.41';
export const UDP_CLUSTER_IP = '10.20.30.42';
export const NODE_PORT = 3001;
export const LOCAL_CLUSTER_IP = '10.20.30.43';
export const LOCAL_NODE_PORT = 3002;

/**
 * The circles' Services, kube-proxy's iptables and nftables rule sets (kube-proxy-rule-sets.ts): the
 * overall dump's, with in iptables ns1/svc1 as the eTP Local dump's (a Local NodePort), and the
 * written rules' beside it (a UDP ClusterIP; in nftables a Local NodePort).
 */
export const CIRCLE_SERVICES = {
  iptables: together(OVERALL_ETP_LOCAL, KUBE_DNS),
  nftables: together(OVERALL, NFT_LOCAL_NODE_PORT, KUBE_DNS),
};

export const SERVICE_SETS = {
  takeover: (): ServicePort[] => {
    const endpoints = (port: number) => [endpoint(POD0, port), endpoint(POD1, port, { isLocal: true })];
    return [
      servicePort('web', { clusterIP: TCP_CLUSTER_IP, nodePort: NODE_PORT, clusterEndpoints: endpoints(80) }),
      servicePort('dns', {
        protocol: 'UDP',
        port: 53,
        clusterIP: UDP_CLUSTER_IP,
        clusterEndpoints: endpoints(53),
      }),
      servicePort('local', {
        clusterIP: LOCAL_CLUSTER_IP,
        nodePort: LOCAL_NODE_PORT,
        externalPolicyLocal: true,
        clusterEndpoints: endpoints(80),
      }),
    ];
  },
  iptables: CIRCLE_SERVICES.iptables.ports,
  nftables: CIRCLE_SERVICES.nftables.ports,
};
export type ServiceSet = keyof typeof SERVICE_SETS;

/** kproxy's model of a set's Services on the node. */
export function kproxyState(nodeIP: string, set: ServiceSet = 'takeover') {
  return ipv4(SERVICE_SETS[set](), {
    localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] },
    nodeIPs: [nodeIP],
  });
}
