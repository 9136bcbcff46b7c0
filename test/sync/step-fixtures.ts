// A sync step as the dataplane tests drive it (render ≡ run in rounds, the huge Service kernel
// test): listeners and metrics that take anything, and a model that gives each state once.
import type { LiveDataplane } from '../../contract/dataplane.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import type { ModelUpdate } from '../../src/model/model-cache.ts';
import { SyncStep, type SyncStepOptions } from '../../src/sync/sync-step.ts';
import { capturedLogger } from '../support/captured-logger.ts';

/** The model as the step sees it: `initial` as a full update, each later state once, then nothing new. */
export function scriptedModel(initial: DualStackState) {
  let update: ModelUpdate = { state: initial, changed: new Set(), full: true, problems: [] };
  return {
    /** The next update: `state`, whose changed service ports are `changed`. */
    next(state: DualStackState, changed: ReadonlySet<ServicePortKey>): void {
      update = { state, changed, full: false, problems: [] };
    },
    async updateInSlices(): Promise<ModelUpdate> {
      const given = update;
      update = { ...given, changed: new Set(), full: false };
      return given;
    },
  };
}

/** A sync step over `dataplane` whose health-check listeners and metrics accept anything. */
export function quietSyncStep(
  model: SyncStepOptions['model'],
  dataplane: Pick<LiveDataplane, 'sync' | 'intact'>,
  roundBudget: number,
): SyncStep {
  return new SyncStep({
    model,
    dataplane,
    healthChecks: { update: async () => ({ failed: [] }) },
    metrics: { problemsCounted() {}, noLocalEndpointsCounted() {} },
    logger: capturedLogger().logger,
    roundBudget,
  });
}
