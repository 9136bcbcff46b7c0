// What the nftables writers of one service port share: the port being written and a key of it to
// dispatch. Its own module so that the dispatch (endpoint-dispatch.ts) and the affinity writers
// (affinity.ts), which call each other's functions, do not import each other's types in a circle.
import type { EndpointList, NodeSettings, ServicePort } from '../../contract/proxy-state.ts';
import type { TrafficDecisions } from '../../contract/traffic-decisions.ts';
import type { FamilySyntax } from '../shared/nft/family-syntax.ts';
import type { RulesetBuilder } from '../shared/nft/ruleset.ts';
import type { EndpointIndexes, EndpointSets } from './endpoint-slots.ts';
import type { DispatchTarget, L4Protocol } from './sets.ts';

/** The service port being written into a family's ruleset: what each writer of its elements needs. */
export interface PortWrite {
  readonly builder: RulesetBuilder;
  readonly syntax: FamilySyntax;
  readonly node: NodeSettings;
  readonly sp: ServicePort;
  /** The port's protocol in nft's words. */
  readonly proto: L4Protocol;
  readonly decisions: TrafficDecisions;
  /** Its endpoints, in slot order (endpoint-slots.ts). */
  readonly sets: EndpointSets;
  /** Only the endpoint elements at these indexes (those an endpoint change rewrites), else all. */
  readonly indexes: EndpointIndexes | undefined;
}

/** A key of the port to send to one of `endpoints` (non-empty): `address` (absent for a node port) . proto . `port`. */
export interface DispatchKey {
  readonly target: DispatchTarget;
  readonly address: string | undefined;
  readonly port: number;
  readonly endpoints: EndpointList;
  /** Only the elements of the endpoints at these indexes, else all. */
  readonly indexes: readonly number[] | undefined;
}
