// The counts the daemon reports on every sync (the sync log line, the no-local-endpoints gauges),
// kept up to date from the changed service ports: at 30k services, walking every port on each
// sync would cost more than the model's whole update.
import type { DualStackState, ServicePort, ServicePortKey } from '../model/proxy-state.ts';
import { trafficDecisions } from '../model/traffic-decisions.ts';

export interface StateCounts {
  readonly servicePorts: number;
  readonly endpoints: number;
  /** Service ports with internalTrafficPolicy Local and endpoints, none of them local. */
  readonly noLocalInternal: number;
  /** Service ports with externalTrafficPolicy Local and endpoints, none of them local. */
  readonly noLocalExternal: number;
}

const ZERO: StateCounts = { servicePorts: 0, endpoints: 0, noLocalInternal: 0, noLocalExternal: 0 };

export class StateCounter {
  #counts = ZERO;
  #state: DualStackState = {};

  /** The counts of `next`; `changed` (relative to the previous call's state) avoids a full walk. */
  update(next: DualStackState, changed?: ReadonlySet<ServicePortKey>): StateCounts {
    const counts = { ...(changed === undefined ? ZERO : this.#counts) };
    for (const family of ['IPv4', 'IPv6'] as const) {
      const before = this.#state[family]?.servicePorts;
      const after = next[family]?.servicePorts;
      if (changed === undefined) {
        for (const port of after?.values() ?? []) add(counts, port, 1);
        continue;
      }
      for (const key of changed) {
        add(counts, before?.get(key), -1);
        add(counts, after?.get(key), 1);
      }
    }
    this.#state = next;
    this.#counts = counts;
    return counts;
  }
}

function add(
  counts: { -readonly [K in keyof StateCounts]: number },
  port: ServicePort | undefined,
  sign: number,
) {
  if (port === undefined) return;
  counts.servicePorts += sign;
  counts.endpoints += sign * port.clusterEndpoints.length;
  const { internalVerdict, externalVerdict } = trafficDecisions(port);
  if (internalVerdict === 'drop') counts.noLocalInternal += sign;
  if (externalVerdict === 'drop') counts.noLocalExternal += sign;
}
