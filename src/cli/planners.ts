// Dataplane mode → its planner. Loaded on demand so a command pays only for the mode it uses.
import type { DataplaneMode, DataplanePlanner } from '../../dataplanes/shared/dataplane.ts';

type PlannerLoader = () => Promise<DataplanePlanner<unknown>>;

const PLANNERS: Partial<Record<DataplaneMode, PlannerLoader>> = {
  nftables: async () => (await import('../../dataplanes/nftables/planner.ts')).nftablesPlanner,
  iptables: async () => (await import('../../dataplanes/iptables/planner.ts')).iptablesPlanner,
};

/** The planner for `mode`, or undefined when this build has none for it. */
export function loadPlanner(mode: DataplaneMode): Promise<DataplanePlanner<unknown>> | undefined {
  return PLANNERS[mode]?.();
}
