// Services + EndpointSlices + this node (+ ServiceCIDRs) → ProxyState per IP family: the model's one entry point,
// called by the CLI (dry-run) and the daemon alike. Input objects come from decodeObject.

import { compareText } from '../../contract/base/compare-text.ts';
import { flatText } from '../../contract/base/flat-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { objectRef, type Problem } from '../../contract/base/problem.ts';
import type { DualStackState, ProxyState, ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import {
  type EndpointSlice,
  type Node,
  type ObjectMeta,
  type Service,
  type ServiceCIDR,
  ZONE_LABEL,
} from '../kube/objects.ts';
import { ClaimIndex, conflictProblems, serviceOfPort, serviceSince } from './address-claims.ts';
import { indexSlicesByService } from './endpoints.ts';
import { keptService } from './kept-service.ts';
import { nodeSettingsByFamily, type ProxyOptions } from './node-settings.ts';
import { serviceCIDRsOf } from './service-cidrs.ts';
import { serviceStatePorts } from './service-port-state.ts';

// The CLI and the daemon import the model's entry points from here.
export { changedServicePorts } from '../../contract/changed-service-ports.ts';
export type { ProxyOptions } from './node-settings.ts';

export interface ModelInput {
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  /** This node's Node object, when known: node IPs, pod CIDRs and zone come from it. */
  readonly node?: Node;
  /** The cluster's ServiceCIDR objects (none: the options' serviceCIDRs are used). */
  readonly serviceCIDRs?: readonly ServiceCIDR[];
}

export interface ModelOutput {
  readonly state: DualStackState;
  readonly problems: readonly Problem[];
}

export function buildProxyState(input: ModelInput, options: ProxyOptions): ModelOutput {
  const problems: Problem[] = [];
  const serviceCIDRs = serviceCIDRsOf(input.serviceCIDRs ?? [], options.serviceCIDRs ?? [], problems);
  const settings = nodeSettingsByFamily(options, input.node, problems, serviceCIDRs);
  const services = uniqueServices(input.services, problems);
  const slicesByService = indexSlicesByService(
    input.endpointSlices,
    options.nodeName,
    problems,
    options.serviceProxyName,
  );
  const zone = input.node?.metadata.labels?.[ZONE_LABEL] ?? '';

  const state: { [F in IPFamily]?: ProxyState } = {};
  const claimsByFamily: ClaimIndex[] = [];
  // What the incremental model keeps of each (kept-service.ts), so both read the same fields.
  const kept = services.map((service) => keptService(service, serviceKey(service)));
  const sinceOf = new Map(kept.map((service) => [service.key, serviceSince(service)]));
  const sinceOfPort = (port: ServicePort) => sinceOf.get(serviceOfPort(port)) ?? Number.POSITIVE_INFINITY;
  for (const family of ['IPv4', 'IPv6'] as const) {
    const node = settings[family];
    if (node === undefined) continue;
    const asked = new Map<ServicePortKey, ServicePort>();
    const claims = new ClaimIndex(sinceOfPort);
    const noneTouched = new Set<string>();
    for (const service of kept) {
      const slices = slicesByService.get(service.key) ?? [];
      const since = serviceSince(service);
      // A later entry with the same key wins, as in the ModelCache.
      const ofService = new Map<ServicePortKey, ServicePort>();
      for (const port of serviceStatePorts(
        service,
        slices,
        family,
        options.nodeName,
        zone,
        options.serviceProxyName,
      ))
        ofService.set(port.key, port);
      for (const port of ofService.values()) {
        asked.set(port.key, port);
        claims.add(port, since, noneTouched);
      }
    }
    const ports = [...asked.values()].sort((a, b) => compareText(a.key, b.key));
    const servicePorts = new Map<ServicePortKey, ServicePort>();
    for (const port of ports) servicePorts.set(port.key, claims.granted(port));
    claimsByFamily.push(claims);
    state[family] = { family, node, servicePorts };
  }
  problems.push(...conflictProblems(claimsByFamily));
  return { state, problems };
}

/** "namespace/name": how slices name the service they belong to. */
export function serviceKey(service: { readonly metadata: ObjectMeta }): string {
  return flatText(service.metadata.namespace ?? 'default', '/', service.metadata.name);
}

/** The same Service twice in the input (e.g. two files): the first one counts. */
function uniqueServices(services: readonly Service[], problems: Problem[]): Service[] {
  const seen = new Set<string>();
  const result: Service[] = [];
  for (const service of services) {
    const ref = objectRef('Service', service.metadata.namespace ?? 'default', service.metadata.name);
    if (seen.has(ref)) {
      problems.push({ object: ref, reason: 'appears more than once; the first one is used' });
      continue;
    }
    seen.add(ref);
    result.push(service);
  }
  return result;
}
