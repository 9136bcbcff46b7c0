import { clusterIpDnat } from './cluster-ip.ts';
import { conntrackPinning } from './conntrack-pinning.ts';
import { noEndpointReject } from './no-endpoints.ts';
import { nodePortDnat } from './node-port.ts';
import type { Scenario } from './scenario.ts';
import { clientIpAffinity } from './session-affinity.ts';
import { externalPolicyCluster, externalPolicyLocal } from './traffic-policy.ts';
import { udpDnat } from './udp.ts';

/** Every scenario, in the order the labs run them. */
export const ALL_SCENARIOS: readonly Scenario[] = [
  clusterIpDnat,
  nodePortDnat,
  udpDnat,
  clientIpAffinity,
  noEndpointReject,
  externalPolicyCluster,
  externalPolicyLocal,
  conntrackPinning,
];
