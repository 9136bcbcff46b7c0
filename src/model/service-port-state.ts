// One Service (and its slices) → its finished ServicePorts of one family: the unit of work both
// the whole-state build and the incremental model cache repeat per service.

import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { ServicePort } from '../../contract/proxy-state.ts';
import type { CandidatesOf } from './candidate-merges.ts';
import { categorizeEndpoints, type EndpointSelection } from './endpoint-selection.ts';
import {
  type PortCandidates,
  portCandidates,
  portMatchKey,
  type SliceEndpoints,
  slicePortsByKey,
} from './endpoints.ts';
import type { ProxiedService } from './kept-service.ts';
import { type ServicePortBase, servicePortsOfFamily } from './service-ports.ts';

const NO_CANDIDATES: PortCandidates = { candidates: [], whole: undefined };

/** `slices` are the records of the service's own slices, in slice-name order. */
export function serviceStatePorts(
  service: ProxiedService,
  slices: readonly SliceEndpoints[],
  family: IPFamily,
  nodeName: string,
  zone: string,
  /** --service-proxy-name (proxy-labels.ts). */
  proxyName?: string,
  /** The incremental model's kept candidates (candidate-merges.ts); else made from the slices. */
  candidatesOf: CandidatesOf = (_, sources) => portCandidates(sources),
): ServicePort[] {
  const bases = servicePortsOfFamily(service, family, proxyName);
  if (bases.length === 0) return [];
  // Port by port: only one port's candidates exist at a time, however many ports the service has.
  const sources = slicePortsByKey(slices, family);
  return bases.map((base) => {
    const matchKey = portMatchKey(base.portName, base.protocol);
    const ofPort = sources.get(matchKey);
    const found = ofPort ? candidatesOf(matchKey, ofPort) : NO_CANDIDATES;
    return servicePort(base, categorizeEndpoints(found, base, nodeName, zone));
  });
}

/**
 * Written out field by field: an object spread of this many fields leaves V8 a separate property
 * array per ServicePort (~110 bytes each, 3 MiB at 30,000 ports).
 */
function servicePort(base: ServicePortBase, selection: EndpointSelection): ServicePort {
  const port: { -readonly [F in keyof ServicePort]: ServicePort[F] } = {
    key: base.key,
    namespace: base.namespace,
    name: base.name,
    portName: base.portName,
    protocol: base.protocol,
    port: base.port,
    clusterIP: base.clusterIP,
    nodePort: base.nodePort,
    externalIPs: base.externalIPs,
    loadBalancerIPs: base.loadBalancerIPs,
    loadBalancerSourceRanges: base.loadBalancerSourceRanges,
    externalPolicyLocal: base.externalPolicyLocal,
    internalPolicyLocal: base.internalPolicyLocal,
    healthCheckNodePort: base.healthCheckNodePort,
    clusterEndpoints: selection.clusterEndpoints,
    localEndpoints: selection.localEndpoints,
    hasEndpoints: selection.hasEndpoints,
  };
  if (base.sessionAffinity !== undefined) port.sessionAffinity = base.sessionAffinity;
  if (selection.otherServingEndpoints !== undefined)
    port.otherServingEndpoints = selection.otherServingEndpoints;
  return port;
}
