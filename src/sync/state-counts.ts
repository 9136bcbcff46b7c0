// The counts the daemon reports on every sync (the sync log line, the no-local-endpoints gauges),
// kept up to date from the changed service ports: at 30k services, walking every port on each
// sync would cost more than the model's whole update.

import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { DualStackState, ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import { trafficDecisions } from '../../contract/traffic-decisions.ts';

/** Service ports whose Local policy has no local endpoint, by policy. */
export interface NoLocalEndpoints {
  /** internalTrafficPolicy Local, endpoints elsewhere only. */
  readonly internal: number;
  /** externalTrafficPolicy Local, endpoints elsewhere only. */
  readonly external: number;
}

/** One entry per family the state serves: kube-proxy labels its gauges with ip_family. */
export type NoLocalEndpointsByFamily = { readonly [F in IPFamily]?: NoLocalEndpoints };

export interface StateCounts {
  readonly servicePorts: number;
  readonly endpoints: number;
  readonly noLocal: NoLocalEndpointsByFamily;
}

const FAMILIES = ['IPv4', 'IPv6'] as const;

interface Tally {
  servicePorts: number;
  endpoints: number;
  noLocal: Record<IPFamily, { internal: number; external: number }>;
}

const zero = (): Tally => ({
  servicePorts: 0,
  endpoints: 0,
  noLocal: { IPv4: { internal: 0, external: 0 }, IPv6: { internal: 0, external: 0 } },
});

export class StateCounter {
  #tally = zero();
  #state: DualStackState = {};

  /** The counts of `next`; `changed` (relative to the previous call's state) avoids a full walk. */
  update(next: DualStackState, changed?: ReadonlySet<ServicePortKey>): StateCounts {
    const tally = changed === undefined ? zero() : this.#tally;
    for (const family of FAMILIES) {
      const before = this.#state[family]?.servicePorts;
      const after = next[family]?.servicePorts;
      if (changed === undefined) {
        for (const port of after?.values() ?? []) add(tally, family, port, 1);
        continue;
      }
      for (const key of changed) {
        add(tally, family, before?.get(key), -1);
        add(tally, family, after?.get(key), 1);
      }
    }
    this.#state = next;
    this.#tally = tally;
    const noLocal: { [F in IPFamily]?: NoLocalEndpoints } = {};
    for (const family of FAMILIES) if (next[family]) noLocal[family] = { ...tally.noLocal[family] };
    return { servicePorts: tally.servicePorts, endpoints: tally.endpoints, noLocal };
  }
}

function add(tally: Tally, family: IPFamily, port: ServicePort | undefined, sign: number) {
  if (port === undefined) return;
  tally.servicePorts += sign;
  tally.endpoints += sign * port.clusterEndpoints.length;
  const { internalVerdict, externalVerdict } = trafficDecisions(port);
  if (internalVerdict === 'drop') tally.noLocal[family].internal += sign;
  if (externalVerdict === 'drop') tally.noLocal[family].external += sign;
}
