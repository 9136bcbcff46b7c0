// The Services of the IPVS takeover VM tests (kube-proxy-ipvs-takeover.vmtest.ts), shared with the
// node agent that runs kproxy's dataplanes in the node's namespace (takeover-agent.ts): upstream's
// TestNodePortIPv4 addresses, a TCP ClusterIP with a NodePort and a UDP ClusterIP beside, each with
// the two pods of the lab's node.

import { endpoint, ipv4, servicePort } from '../../../../harness/proxy-states.ts';
import { CLUSTER_CIDR_V4 } from '../../../../harness/topology.ts';

export const TCP_CLUSTER_IP = '10.20.30.41';
export const UDP_CLUSTER_IP = '10.20.30.42';
export const NODE_PORT = 3001;
export const [POD0, POD1] = ['10.244.1.10', '10.244.1.11'];

/** kproxy's model of the same Services. */
export function kproxyState(nodeIP: string) {
  const endpoints = (port: number) => [endpoint(POD0!, port), endpoint(POD1!, port, { isLocal: true })];
  return ipv4(
    [
      servicePort('web', { clusterIP: TCP_CLUSTER_IP, nodePort: NODE_PORT, clusterEndpoints: endpoints(80) }),
      servicePort('dns', {
        protocol: 'UDP',
        port: 53,
        clusterIP: UDP_CLUSTER_IP,
        clusterEndpoints: endpoints(53),
      }),
    ],
    { localDetector: { mode: 'ClusterCIDR', cidrs: [CLUSTER_CIDR_V4] }, nodeIPs: [nodeIP] },
  );
}
