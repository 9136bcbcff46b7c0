// Work of the daemon's own that follows the dataplane's syncs (another mode's cleanup, the
// localhost node port forwarder): it wraps the live dataplane, so whoever syncs it (the sync step)
// needs to know nothing of it, and it sees each sync's state and outcome once the kernel has them.
import type { CleanupCommand, LiveDataplane, SyncKind, SyncOutcome } from '../../contract/dataplane.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';

/** `dataplane`, with afterSync run when each of its syncs has returned, before its caller sees it. */
export abstract class SyncFollower implements LiveDataplane {
  readonly #dataplane: LiveDataplane;

  constructor(dataplane: LiveDataplane) {
    this.#dataplane = dataplane;
  }

  /** What follows a sync that returned (a sync that threw is not followed). */
  protected abstract afterSync(state: DualStackState, outcome: SyncOutcome): Promise<void>;

  get mode() {
    return this.#dataplane.mode;
  }

  start(): Promise<void> {
    return this.#dataplane.start();
  }

  async sync(
    state: DualStackState,
    kind: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<SyncOutcome> {
    const outcome = await this.#dataplane.sync(state, kind, changed);
    await this.afterSync(state, outcome);
    return outcome;
  }

  intact(): Promise<boolean> {
    return this.#dataplane.intact();
  }

  settled(): Promise<void> {
    return this.#dataplane.settled?.() ?? Promise.resolve();
  }

  cleanup(): Promise<readonly string[]> {
    return this.#dataplane.cleanup();
  }

  cleanupCommands(): Promise<readonly CleanupCommand[]> {
    return this.#dataplane.cleanupCommands();
  }
}
