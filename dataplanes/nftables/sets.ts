// Every set and map of kproxy's nftables table, declared once: its name, and its role, which says
// how a service port's elements there relate to other ports' elements. The ruleset built in pieces
// (cold-start.ts) and the fast path of incremental syncs (fragment-index.ts) take the lists they
// need from the roles; base-objects.ts gives each set its type, the writers use these names.
// test/dataplanes/nftables/sets.test.ts checks the roles against what service ports write.
import type { NodeSettings } from '../../contract/proxy-state.ts';
import { AFFINITY_CLIENTS } from '../shared/nft/affinity.ts';
import { CANARY_SET } from '../shared/nft/ruleset.ts';
import { FIREWALL_ALLOW, FIREWALL_IPS } from '../shared/nft/service-rules.ts';

/** A group of claimed sets: a key in any set of a group belongs to one service port. */
export type ClaimGroup = 'vip' | 'nodeport' | 'firewall';

export type SetRole =
  /**
   * Keyed by an address:port/protocol or node port/protocol the port claims (the model gives each
   * to one port, src/model/address-claims.ts): the fast path records the claim's owner.
   */
  | { readonly kind: 'claimed'; readonly group: ClaimGroup }
  /** Elements several ports may add alike: the fast path counts who adds them. */
  | { readonly kind: 'shared' }
  /** Keyed under a key the port claims (endpoints, source ranges, affinity): the port's alone. */
  | { readonly kind: 'own' }
  /** No service port writes it (the node's addresses, the canary, what the kernel fills). */
  | { readonly kind: 'node' };

export interface NftSet {
  readonly name: string;
  readonly role: SetRole;
  /**
   * A port looks up whether another one added the element before adding it (addFirewall): a
   * ruleset built in pieces must remember its elements.
   */
  readonly lookedUp?: true;
}

const claimed = (name: string, group: ClaimGroup): NftSet => ({ name, role: { kind: 'claimed', group } });
const shared = (name: string): NftSet => ({ name, role: { kind: 'shared' } });
const own = (name: string): NftSet => ({ name, role: { kind: 'own' } });
const node = (name: string): NftSet => ({ name, role: { kind: 'node' } });

export const L4_PROTOCOLS = ['tcp', 'udp', 'sctp'] as const;
export type L4Protocol = (typeof L4_PROTOCOLS)[number];

/**
 * Where a key's endpoints go (endpoint-dispatch.ts): the dispatch map (key -> the chain picking
 * one endpoint) and the endpoint maps of one of the four targets.
 */
export interface DispatchTarget {
  readonly dispatchMap: string;
  /** `<backendsMap>-<proto>`: key . index -> endpoint (one per protocol: base-objects.ts says why). */
  readonly backendsMap: string;
  /** ClientIP affinity's maps (affinity.ts): this (key . index -> endpoint), `…-ips`, `…-ports`. */
  readonly affinityMap: string;
  readonly nodePort: boolean;
}

function target(dispatchMap: string, backendsMap: string, nodePort: boolean): DispatchTarget {
  return { dispatchMap, backendsMap, affinityMap: `affinity-${backendsMap}`, nodePort };
}

/** `<backendsMap>-<proto>-counts`: key -> its endpoint count, for keys with counted dispatch (endpoint-dispatch.ts). */
export function countsMap(target: DispatchTarget, proto: L4Protocol): string {
  return `${target.backendsMap}-${proto}-counts`;
}

export const CLUSTER = target('cluster-endpoints', 'backends', false);
export const LOCAL = target('local-endpoints', 'local-backends', false);
export const NODEPORT_CLUSTER = target('nodeport-cluster-endpoints', 'nodeport-backends', true);
export const NODEPORT_LOCAL = target('nodeport-local-endpoints', 'nodeport-local-backends', true);
export const DISPATCH_TARGETS: readonly DispatchTarget[] = [CLUSTER, LOCAL, NODEPORT_CLUSTER, NODEPORT_LOCAL];

export const SETS = {
  serviceIps: claimed('service-ips', 'vip'),
  serviceNodePorts: claimed('service-nodeports', 'nodeport'),
  noEndpointServices: claimed('no-endpoint-services', 'vip'),
  noEndpointNodePorts: claimed('no-endpoint-nodeports', 'nodeport'),
  noEndpointServicesReject: claimed('no-endpoint-services-reject', 'vip'),
  noEndpointNodePortsReject: claimed('no-endpoint-nodeports-reject', 'nodeport'),
  firewallIps: { ...claimed(FIREWALL_IPS, 'firewall'), lookedUp: true },
  firewallAllow: own(FIREWALL_ALLOW),
  /** A service's cluster IP, added by each of its ports. */
  clusterIps: shared('cluster-ips'),
  /** A local endpoint . itself, added by each port it serves. */
  hairpin: shared('hairpin'),
  nodePortIps: node('nodeport-ips'),
  canary: node(CANARY_SET),
  affinityClients: node(AFFINITY_CLIENTS),
  affinityTimeouts: own('affinity-timeouts'),
  affinityNodePortTimeouts: own('affinity-nodeport-timeouts'),
} as const satisfies Record<string, NftSet>;

/** Every set of the table (base-objects.ts makes one of each). */
export const ALL_SETS: readonly NftSet[] = [
  ...Object.values(SETS),
  ...DISPATCH_TARGETS.flatMap((t) => [
    own(t.dispatchMap),
    ...L4_PROTOCOLS.flatMap((proto) => [own(`${t.backendsMap}-${proto}`), own(countsMap(t, proto))]),
    own(t.affinityMap),
    own(`${t.affinityMap}-ips`),
    own(`${t.affinityMap}-ports`),
  ]),
];

/**
 * Maps keyed by a key and an endpoint's index in it (key . index -> endpoint): after incremental
 * syncs an index holds the endpoint its slot gives it (endpoint-slots.ts), not the model's order.
 * With Maglev tables (endpointHash 'consistent') the backends maps are keyed by Maglev slot instead,
 * a function of the key's endpoints alone (maglev.ts) that every sync keeps slot for slot: two
 * slots swapped there send clients elsewhere, so those maps are not among these.
 */
export function indexedMaps(endpointHash: NodeSettings['endpointHash']): ReadonlySet<string> {
  return new Set(
    DISPATCH_TARGETS.flatMap((t) => [
      ...(endpointHash === 'consistent' ? [] : L4_PROTOCOLS.map((proto) => `${t.backendsMap}-${proto}`)),
      t.affinityMap,
      `${t.affinityMap}-ips`,
    ]),
  );
}

/** The claim group of each claimed set. */
export const CLAIM_GROUPS: ReadonlyMap<string, ClaimGroup> = new Map(
  ALL_SETS.flatMap((set) => (set.role.kind === 'claimed' ? [[set.name, set.role.group] as const] : [])),
);

/** Sets whose elements several ports may add. */
export const SHARED_SETS: ReadonlySet<string> = new Set(
  ALL_SETS.filter((set) => set.role.kind === 'shared').map((set) => set.name),
);

/**
 * Sets whose elements a service port may add again or look up after another port's: a ruleset
 * built in pieces must remember them (RulesetBuilder.drain). A claimed key is one port's, so the
 * other sets need not be remembered.
 */
export const CROSS_PORT_SETS: ReadonlySet<string> = new Set(
  ALL_SETS.filter((set) => set.role.kind === 'shared' || set.lookedUp).map((set) => set.name),
);
