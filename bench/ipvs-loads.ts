// The IPVS section's loads (ipvs-speed.ts), in order: each point of the curve (its bare load and
// kproxy's cold sync, with its change and connect figures), then the ClientIP rounds, plain and affinity alternating. Each part of a load (a
// point's bare load and cold sync, a round's cold sync) runs in a network namespace made for it
// (IPVS state, its trash of deleted real servers included, is per namespace), so no load waits
// for the trash an earlier one left. Pure, so the plan is unit-tested.
import type { ClusterShape } from './synthetic-cluster.ts';

export interface IpvsLoad {
  /** A point of the curve, or one ClientIP round (`affinity` says which side). */
  readonly kind: 'point' | 'affinity-round';
  readonly shape: ClusterShape;
  /** Change and connect figures after the cold sync (points only). */
  readonly detailed: boolean;
  readonly affinity: boolean;
}

export interface IpvsLoadOptions {
  /** The curve's sizes, N services each; a 0 is no point (`--services 0`: the affinity rounds alone). */
  readonly services: readonly number[];
  readonly endpointsPerService: number;
  /** The wide Service's endpoints; 0: no wide point. */
  readonly wideEndpoints: number;
  readonly affinityServices: number;
  readonly rounds: number;
}

export function ipvsLoads(options: IpvsLoadOptions): IpvsLoad[] {
  const endpointsPerService = options.endpointsPerService;
  const point = (shape: ClusterShape): IpvsLoad => ({
    kind: 'point',
    shape,
    detailed: true,
    affinity: false,
  });
  const points = options.services
    .filter((services) => services > 0)
    .map((services) => point({ services, endpointsPerService, wide: false }));
  if (options.wideEndpoints > 0)
    points.push(point({ services: 1, endpointsPerService: options.wideEndpoints, wide: true }));
  const shape = { services: options.affinityServices, endpointsPerService, wide: false };
  const rounds = Array.from({ length: options.rounds }, () =>
    [false, true].map((affinity): IpvsLoad => ({ kind: 'affinity-round', shape, detailed: false, affinity })),
  ).flat();
  return [...points, ...rounds];
}

/** What a load measures, in this order, each part in a namespace of its own. */
export type IpvsLoadPart = 'bare' | 'cold';

export function loadParts(load: IpvsLoad): IpvsLoadPart[] {
  return load.kind === 'point' ? ['bare', 'cold'] : ['cold'];
}
