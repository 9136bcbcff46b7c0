// The stale UDP conntrack reconciler every dataplane runs after its sync (stale-udp-flows.ts says
// what is stale). UDP has no connection to break: without it a client that keeps its socket keeps
// its old translation, to a gone endpoint or to nowhere, for as long as it keeps sending.
//
// When: after the first sync (start-up: what went stale while kproxy was down goes, healthy flows
// stay), after every full sync (a periodic safety net, one dump), after an incremental sync that
// changed a UDP service port (only those ports' flows are judged), and after any sync following a
// reconcile that failed (the state it missed is kept, so a deleted service is still found).
// How: one `conntrack -L` per family, planned in slices, then one `conntrack -D` per stale
// (destination, port, endpoint): each deletes all of that triple's flows at once.
// A failed `conntrack` is logged and retried after the next sync, never a failed sync: the rules
// are in place, and a full resync would not help conntrack.
import { performance } from 'node:perf_hooks';
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import { runInSlices } from '../../../contract/base/work-slices.ts';
import { changedServicePorts } from '../../../contract/changed-service-ports.ts';
import type { ConntrackReconciled, SyncKind } from '../../../contract/dataplane.ts';
import { DataplaneError } from '../../../contract/dataplane-error.ts';
import type { DualStackState, ServicePortKey } from '../../../contract/proxy-state.ts';
import type { CommandRunner } from '../command-runner.ts';
import { deleteConntrackEntries, listUdpFlows } from './conntrack-tool.ts';
import {
  indexesAnything,
  type StaleFlowFilter,
  servingIndex,
  staleFlowFilters,
  touchesUdp,
} from './stale-udp-flows.ts';
import { CONNTRACK_FAMILY, parseUdpFlows } from './udp-flow-listing.ts';

/** One family's reconcile, for the metrics and the sync log. */
export type ConntrackLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

export class UdpConntrackReconciler {
  readonly #runner: CommandRunner;
  readonly #log: ConntrackLog;
  /** The state the flows were last reconciled against (or judged untouched by a sync). */
  #reconciled: DualStackState | undefined;
  /** Start-up, or the last reconcile failed: judge every UDP service port. */
  #owed = true;
  /** The last reconcile failed (logged once per run of failures). */
  #failing = false;

  constructor(runner: CommandRunner, log: ConntrackLog = () => {}) {
    this.#runner = runner;
    this.#log = log;
  }

  /**
   * Call after each successful sync to `next`. `ran` is the sync that ran; `changed`, when known,
   * the service ports that differ from the previous sync's state (else compared here).
   */
  async afterSync(
    next: DualStackState,
    ran: SyncKind,
    changed?: ReadonlySet<ServicePortKey>,
  ): Promise<ConntrackReconciled[]> {
    const prev = this.#reconciled;
    const everything = this.#owed || ran === 'full' || prev === undefined;
    const results: ConntrackReconciled[] = [];
    try {
      for (const family of FAMILIES) {
        const before = prev?.[family];
        const after = next[family];
        if (before === undefined && after === undefined) continue;
        const only = everything ? undefined : (changed ?? changedServicePorts(before, after));
        if (only !== undefined && !touchesUdp(only, before, after)) continue;
        const result = await this.#reconcile(family, before, after, only);
        if (result) results.push(result);
      }
    } catch (error) {
      if (!(error instanceof DataplaneError)) throw error;
      if (!this.#failing)
        this.#log('conntrack: stale UDP flows not reconciled; retrying after each sync', {
          error: String(error),
        });
      this.#owed = true;
      this.#failing = true;
      return results;
    }
    this.#owed = false;
    this.#failing = false;
    this.#reconciled = next;
    return results;
  }

  async #reconcile(
    family: IPFamily,
    before: DualStackState[IPFamily],
    after: DualStackState[IPFamily],
    only: ReadonlySet<ServicePortKey> | undefined,
  ): Promise<ConntrackReconciled | undefined> {
    const start = performance.now();
    const index = await runInSlices(servingIndex(after, before, only));
    if (!indexesAnything(index)) return undefined;
    const listing = await runInSlices(parseUdpFlows(await listUdpFlows(this.#runner, family), family));
    let deleted = 0;
    for (const filter of await runInSlices(staleFlowFilters(family, listing.flows, index)))
      deleted += await deleteConntrackEntries(this.#runner, filterArgs(filter));
    const durationMs = performance.now() - start;
    if (deleted > 0 || listing.unparsed > 0) {
      this.#log('conntrack: stale UDP flows deleted', { family, deleted, unparsed: listing.unparsed });
    }
    return { family, deleted, durationMs, unparsed: listing.unparsed };
  }
}

/** `conntrack -D` filter arguments for one stale (destination, port, endpoint). */
export function filterArgs(filter: StaleFlowFilter): string[] {
  return [
    '-f',
    CONNTRACK_FAMILY[filter.family],
    '-p',
    'udp',
    '--orig-dst',
    filter.origDst,
    '--dport',
    `${filter.port}`,
    '--reply-src',
    filter.replySrc,
  ];
}
