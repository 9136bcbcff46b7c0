// One Service (and its slices) → its finished ServicePorts of one family: the unit of work both
// the whole-state build and the incremental model cache repeat per service.
import type { EndpointSlice, Service } from '../kube/objects.ts';
import { categorizeEndpoints } from './endpoint-selection.ts';
import { type CandidateEndpoint, endpointsByPort, portMatchKey } from './endpoints.ts';
import type { IPFamily, ServicePort } from './proxy-state.ts';
import { servicePortsOfFamily } from './service-ports.ts';

const NO_ENDPOINTS: readonly CandidateEndpoint[] = [];

/** `slices` are the service's own, in slice-name order (indexSlicesByService's order). */
export function serviceStatePorts(
  service: Service,
  slices: readonly EndpointSlice[],
  family: IPFamily,
  nodeName: string,
  zone: string,
): ServicePort[] {
  const bases = servicePortsOfFamily(service, family);
  if (bases.length === 0) return [];
  const endpoints = endpointsByPort(slices, family, nodeName);
  return bases.map((base) => {
    const candidates = endpoints.get(portMatchKey(base.portName, base.protocol)) ?? NO_ENDPOINTS;
    return { ...base, ...categorizeEndpoints(candidates, base, nodeName, zone) };
  });
}
