// kproxy run in one mode removes what a run in another mode left (the daemon leaves its rules on
// stop, so switching --proxy-mode leaves the old mode's rules loaded), as kube-proxy removes the
// other modes' leftovers at start. Only AFTER the running mode's first full sync has committed:
// the new rules take effect before the old ones go, so no new connection meets a node with
// neither (docs/architecture.md, "Switching modes"). The modes own disjoint objects (nft tables
// kproxy and kproxy-ipvs, KPROXY-* iptables chains, the kproxy-ipvs0 link and the virtual servers
// on its addresses), so no mode's cleanup touches the running one's rules, and it runs beside the
// syncs: IPVS's waits for the connections IPVS balances to end first (up to its drain bound,
// minutes; dataplanes/shared/ipvs-drain.ts), which must not hold up the Services' changes.
import type { LiveDataplane, SyncOutcome } from '../../contract/dataplane.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { SyncFollower } from './sync-follower.ts';

export interface OtherModesCleanupLog {
  /** What one other mode's cleanup removed (never called for a mode that had nothing). */
  removed(mode: string, what: readonly string[]): void;
  /** A cleanup failed; it is tried again after the next full sync. */
  failed(error: unknown): void;
}

/** `dataplane`, whose first committed full sync is followed by every other mode's cleanup. */
export class OtherModesCleanup extends SyncFollower {
  readonly #others: () => Promise<readonly LiveDataplane[]>;
  readonly #log: OtherModesCleanupLog;
  #done = false;
  /** The cleanup a full sync started, while it runs. */
  #running: Promise<void> | undefined;

  constructor(
    dataplane: LiveDataplane,
    others: () => Promise<readonly LiveDataplane[]>,
    log: OtherModesCleanupLog,
  ) {
    super(dataplane);
    this.#others = others;
    this.#log = log;
  }

  protected async afterSync(_state: DualStackState, outcome: SyncOutcome): Promise<void> {
    // A full sync replaced whatever the running mode had: from here its rules serve every Service.
    if (this.#done || this.#running !== undefined || outcome.kind !== 'full') return;
    this.#running = this.#cleanOthers().finally(() => {
      this.#running = undefined;
    });
  }

  /** Resolves when the cleanup a full sync started has ended (at once when none runs). */
  cleaned(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  async #cleanOthers(): Promise<void> {
    try {
      for (const other of await this.#others()) {
        const removed = await other.cleanup();
        if (removed.length > 0) this.#log.removed(other.mode, removed);
      }
      this.#done = true;
    } catch (error) {
      this.#log.failed(error);
    }
  }
}
