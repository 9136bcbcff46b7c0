// kube-proxy's --ipvs-scheduler (ipvs.scheduler) in nftables mode: its counterpart where one can
// exist without kernel state per connection. rr has the default, a pick at random (numgen), which
// spreads connections as evenly; sh is a hash of the client address, mh a Maglev table the client
// address is hashed into (endpoint-dispatch.ts, maglev.ts). The
// others weigh or count connections (wrr, lc, wlc, sed, nq, ...) or hash the destination (dh,
// which picks one endpoint for every client of a Service): nftables keeps no such counts, so they
// fall back to random with a warning.
import type { DualStackState, NodeSettings, ProxyState } from '../../contract/proxy-state.ts';

export type EndpointHash = NonNullable<NodeSettings['endpointHash']>;

export interface SchedulerChoice {
  /** Absent: at random. */
  readonly endpointHash: EndpointHash | undefined;
  /** Why the scheduler asked for has no counterpart, for the log at start. */
  readonly warning?: string;
}

export function schedulerChoice(scheduler: string | undefined): SchedulerChoice {
  if (scheduler === undefined || scheduler === '' || scheduler === 'rr') return { endpointHash: undefined };
  if (scheduler === 'sh') return { endpointHash: 'source' };
  if (scheduler === 'mh') return { endpointHash: 'consistent' };
  return {
    endpointHash: undefined,
    warning:
      `ipvs.scheduler ${scheduler} has no nftables counterpart (it needs per-connection kernel state): ` +
      'endpoints are picked at random; sh and mh have one (hashes of the client address)',
  };
}

/**
 * The state with every family's node settings carrying `hash`. One node settings object is kept per
 * input object, so a state whose settings did not change keeps the same object (planner.ts compares
 * them by identity first).
 */
export function endpointHashApplier(
  hash: EndpointHash | undefined,
): (state: DualStackState) => DualStackState {
  if (hash === undefined) return (state) => state;
  const nodes = new WeakMap<NodeSettings, NodeSettings>();
  const family = (s: ProxyState | undefined): ProxyState | undefined => {
    if (s === undefined) return undefined;
    let node = nodes.get(s.node);
    if (node === undefined) {
      node = { ...s.node, endpointHash: hash };
      nodes.set(s.node, node);
    }
    return { ...s, node };
  };
  return (state) => ({
    ...(state.IPv4 && { IPv4: family(state.IPv4) }),
    ...(state.IPv6 && { IPv6: family(state.IPv6) }),
  });
}
