// The nftables planner as the live dataplane runs it after a full sync: each incremental plan starts
// from the endpoint slots the plans before it left (endpoint-slots.ts), committed once rendered.
// A chain of bare planIncremental calls assumes every previous state was numbered in address
// order, which a kernel that applied them in turn no longer is.

import { runAll } from '../../../contract/base/work-slices.ts';
import type { DataplanePlanner } from '../../../contract/dataplane.ts';
import type { SlotRecord } from '../../../dataplanes/nftables/endpoint-slots.ts';
import { incrementalPlanSteps, type NftPlan, nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import type { NftFamily } from '../../../dataplanes/shared/nft/transaction.ts';

export function plannerAfterFullSync(): DataplanePlanner<NftPlan> {
  const slots = new Map<NftFamily, SlotRecord>();
  return {
    ...nftablesPlanner,
    planIncremental: (prev, next) => runAll(incrementalPlanSteps(prev, next, { slots })),
    render(plan) {
      const script = nftablesPlanner.render(plan);
      plan.commit?.();
      return script;
    },
  };
}
