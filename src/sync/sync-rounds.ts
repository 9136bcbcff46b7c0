// A large incremental change is applied in rounds, so that one huge Service does not hold up every
// other Service's change (issue 10): the changed service ports, cheapest first, packed into rounds
// of at most ROUND_BUDGET endpoints. Each round's state is the previous one with a subset of the
// changed ports taken from the new state, a port wholly old or wholly new, and ports that contest
// an address or a port (address-claims.ts) always go together, so that every intermediate state
// is one the model could have built: no two ports claim the same address:port or node port.
//
// Pure and deterministic: the sync step (sync-step.ts) and `kproxy render --since` (src/cli) split
// the same change the same way, so without events in between they send the same bytes.
import { isDeepStrictEqual } from 'node:util';
import { compareText } from '../../contract/base/compare-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import { LayeredPortMap } from '../../contract/layered-port-map.ts';
import type { DualStackState, ProxyState, ServicePort, ServicePortKey } from '../../contract/proxy-state.ts';
import { forEachClaimText, serviceOfPort } from '../model/address-claims.ts';

/**
 * Endpoints (a service port's rules and chains grow with them) one round may change: about one
 * second of work in iptables mode, the slowest, where one Service of 1,000 ports × 100 endpoints
 * (100k endpoints) took 14 s to sync (docs/benchmarks-log.md, "Event loop and huge objects"), i.e.
 * ~7,000 endpoints a second. A change under it, nearly all of them, is one round as before.
 */
export const ROUND_BUDGET = 7_000;

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

/** What a port costs a round: its endpoints (each a chain or an element or a real server), plus itself. */
function portCost(port: ServicePort | undefined): number {
  return port === undefined ? 0 : 1 + port.clusterEndpoints.length + port.localEndpoints.length;
}

/**
 * The changed service ports in rounds, each round's keys sorted; always at least one round. One
 * round when the change fits the budget, or when the node settings or the families served differ
 * (every port is rewritten then). Otherwise groups of ports that must change together (one port;
 * ports contesting a claim) go cheapest first (ties by key), a round closing before the group that
 * would take it over the budget; a group over the budget alone is a round of its own.
 */
export function syncRounds(
  prev: DualStackState,
  next: DualStackState,
  changed: ReadonlySet<ServicePortKey>,
  budget = ROUND_BUDGET,
): readonly (readonly ServicePortKey[])[] {
  const keys = [...changed].sort(compareText);
  if (!sameFrame(prev, next)) return [keys];
  const cost = new Map<ServicePortKey, number>();
  let total = 0;
  for (const key of keys) {
    let ofKey = 0;
    for (const family of FAMILIES) {
      ofKey += Math.max(
        portCost(prev[family]?.servicePorts.get(key)),
        portCost(next[family]?.servicePorts.get(key)),
      );
    }
    cost.set(key, Math.max(1, ofKey));
    total += cost.get(key)!;
  }
  if (total <= budget) return [keys];
  const groups = contestGroups(prev, next, keys).map((group) => ({
    keys: group,
    cost: group.reduce((sum, key) => sum + cost.get(key)!, 0),
  }));
  groups.sort((a, b) => a.cost - b.cost || compareText(a.keys[0]!, b.keys[0]!));
  const rounds: ServicePortKey[][] = [];
  let round: ServicePortKey[] = [];
  let used = 0;
  for (const group of groups) {
    if (round.length > 0 && used + group.cost > budget) {
      rounds.push(round.sort(compareText));
      round = [];
      used = 0;
    }
    round.push(...group.keys);
    used += group.cost;
  }
  rounds.push(round.sort(compareText));
  return rounds;
}

/**
 * `prev` with the ports `keys` as `next` has them (added, changed or removed) and every other
 * port as it was. Only for states of the same frame (syncRounds splits no other).
 */
export function stateAfterRound(
  prev: DualStackState,
  next: DualStackState,
  keys: readonly ServicePortKey[],
): DualStackState {
  const state: { [F in IPFamily]?: ProxyState } = {};
  for (const family of FAMILIES) {
    const before = prev[family];
    const after = next[family];
    if (before === undefined || after === undefined) continue;
    const updates = new Map<ServicePortKey, ServicePort | undefined>();
    for (const key of keys) updates.set(key, after.servicePorts.get(key));
    state[family] = {
      family,
      node: before.node,
      servicePorts: LayeredPortMap.next(before.servicePorts, updates),
    };
  }
  return state;
}

/** One round of a sync: the ports it changes and the state it commits. */
export interface SyncRound {
  readonly keys: readonly ServicePortKey[];
  readonly state: DualStackState;
}

/**
 * The rounds of an incremental sync from `prev` to `next` with nothing arriving in between, as
 * the sync step commits them (`kproxy render --since` prints these); the last state is `next`.
 */
export function roundsBetween(
  prev: DualStackState,
  next: DualStackState,
  budget = ROUND_BUDGET,
): SyncRound[] {
  const changed = new Set<ServicePortKey>();
  for (const family of FAMILIES) {
    for (const key of changedServicePorts(prev[family], next[family])) changed.add(key);
  }
  const rounds = syncRounds(prev, next, changed, budget);
  let state = prev;
  return rounds.map((keys, i) => {
    state = i === rounds.length - 1 ? next : stateAfterRound(state, next, keys);
    return { keys, state };
  });
}

/** The same families, each with the same node settings: only then can ports move one by one. */
function sameFrame(prev: DualStackState, next: DualStackState): boolean {
  return FAMILIES.every((family) => {
    const before = prev[family];
    const after = next[family];
    if (before === undefined || after === undefined) return before === after;
    return before.node === after.node || isDeepStrictEqual(before.node, after.node);
  });
}

/**
 * The keys in groups that must change in one round: ports whose old or new values claim the same
 * address:port or node port (a freed address taken by another port in the same change would be
 * claimed twice in between), or the same health check node port from two Services. In key order.
 */
function contestGroups(
  prev: DualStackState,
  next: DualStackState,
  keys: readonly ServicePortKey[],
): ServicePortKey[][] {
  const parent = new Map<ServicePortKey, ServicePortKey>(keys.map((key) => [key, key]));
  const root = (key: ServicePortKey): ServicePortKey => {
    let at = key;
    while (parent.get(at) !== at) at = parent.get(at)!;
    parent.set(key, at);
    return at;
  };
  const join = (a: ServicePortKey, b: ServicePortKey) => {
    const [ra, rb] = [root(a), root(b)];
    if (ra !== rb) parent.set(rb, ra);
  };
  const claimedBy = new Map<string, ServicePortKey>();
  /** Health check node port → the ports claiming it and whether two Services do. */
  const healthChecks = new Map<string, { keys: ServicePortKey[]; service: string; shared: boolean }>();
  for (const key of keys) {
    for (const family of FAMILIES) {
      for (const port of [prev[family]?.servicePorts.get(key), next[family]?.servicePorts.get(key)]) {
        if (port === undefined) continue;
        forEachClaimText(port, (claim, sharedByService) => {
          if (!sharedByService) {
            const other = claimedBy.get(claim);
            if (other === undefined) claimedBy.set(claim, key);
            else join(other, key);
            return;
          }
          const service = serviceOfPort(port);
          const entry = healthChecks.get(claim);
          if (entry === undefined) healthChecks.set(claim, { keys: [key], service, shared: false });
          else {
            entry.keys.push(key);
            entry.shared ||= entry.service !== service;
          }
        });
      }
    }
  }
  for (const { keys: claimants, shared } of healthChecks.values()) {
    if (shared) for (const key of claimants) join(claimants[0]!, key);
  }
  const groups = new Map<ServicePortKey, ServicePortKey[]>();
  for (const key of keys) {
    const group = groups.get(root(key));
    if (group === undefined) groups.set(root(key), [key]);
    else group.push(key);
  }
  return [...groups.values()];
}
