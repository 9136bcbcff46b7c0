// Dataplane mode → its planner. Loaded on demand so a command pays only for the mode it uses.
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { ProxyConfig } from '../config/config.ts';

type PlannerLoader = (config: ProxyConfig) => Promise<DataplanePlanner<unknown>>;

const PLANNERS: Record<ProxyConfig['mode'], PlannerLoader> = {
  nftables: async (config) =>
    (await import('../../dataplanes/nftables/planner.ts')).createNftablesPlanner({
      scheduler: config.ipvs.scheduler,
    }),
  iptables: async () => (await import('../../dataplanes/iptables/planner.ts')).iptablesPlanner,
  ipvs: async (config) =>
    (await import('../../dataplanes/ipvs/planner.ts')).createIpvsPlanner({
      scheduler: config.ipvs.scheduler,
    }),
};

/** Every mode `render` can print, in the order help lists them. */
export const RENDER_MODES = Object.keys(PLANNERS) as readonly ProxyConfig['mode'][];

/** The planner for the configured mode. */
export function loadPlanner(config: ProxyConfig): Promise<DataplanePlanner<unknown>> {
  return PLANNERS[config.mode](config);
}
