// What the daemon says when its integrity check (LiveDataplane.intact) finds its rules damaged:
// the comparison `kproxy diff` prints (dataplanes/shared/drift/drift-report.ts), run against the
// state last synced before the repair changes the kernel, as metrics and log lines.
//
// - kproxy_sync_proxy_rules_drift{mode,kind}: the pieces that comparison found missing, extra or
//   different; back to 0 at the first check that finds the rules intact (the one after a repair).
// - kproxy_sync_proxy_rules_drift_repairs_total{mode}: syncs that repaired damage a check found.
// - after each repair, one warning per Service port with what was repaired, and one per rule of
//   another owner that drops a Service's packets (not kproxy's to repair).
//
// The comparison costs what `kproxy diff` does (the render listed back, kproxy's tables read) and
// delays the repair by as much; it runs only when a check found damage. A dataplane without a
// reader (tests' stand-ins) and a comparison that fails still count and log the repair, without
// the pieces.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { DataplaneMode } from '../../contract/dataplane.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import {
  countByKind,
  DRIFT_KINDS,
  type DriftPiece,
  type DriftReader,
  type DriftReport,
  pieceText,
} from '../../dataplanes/shared/drift/drift-report.ts';
import type { Syncer, SyncLoopEvent } from '../sync/sync-loop.ts';

export interface DriftWatchOptions {
  readonly mode: DataplaneMode;
  /** The mode's comparison; absent for a mode without one. */
  readonly read: DriftReader | undefined;
  readonly registry: Registry;
  readonly logger: Logger;
}

/** What a check that found damage knew of it, until the sync that repairs it. */
type Damage = { readonly report: DriftReport } | { readonly unknown: string };

export class DriftWatch {
  readonly #options: DriftWatchOptions;
  readonly #pieces: Gauge<'mode' | 'kind'>;
  readonly #repairs: Counter<'mode'>;
  #damage: Damage | undefined;

  constructor(options: DriftWatchOptions) {
    this.#options = options;
    const registers = [options.registry];
    this.#pieces = new Gauge({
      name: 'kproxy_sync_proxy_rules_drift',
      help: 'Pieces of the rules (rules, chains, set elements) the last integrity check that found damage saw missing, extra or different (kproxy diff); 0 once a check finds the rules intact',
      labelNames: ['mode', 'kind'],
      registers,
    });
    this.#repairs = new Counter({
      name: 'kproxy_sync_proxy_rules_drift_repairs_total',
      help: 'Syncs that repaired rules an integrity check found damaged',
      labelNames: ['mode'],
      registers,
    });
    this.#repairs.inc({ mode: options.mode }, 0);
    this.#setPieces(undefined);
  }

  /**
   * `syncer` whose intact() compares the kernel with `applied()` (the state last synced) when it
   * answers false.
   */
  watching(syncer: Syncer, applied: () => DualStackState): Syncer {
    return {
      sync: (kind) => syncer.sync(kind),
      intact: async () => {
        // A check that throws is damage to the loop too (sync-loop.ts).
        const intact = await syncer.intact().catch(() => false);
        if (!intact) this.#damage = await this.#compare(applied());
        return intact;
      },
    };
  }

  /** Feed every sync loop event here. */
  observe(event: SyncLoopEvent): void {
    if (event.type === 'checked') this.#setPieces(undefined);
    if (event.type !== 'synced' || this.#damage === undefined) return;
    const damage = this.#damage;
    this.#damage = undefined;
    this.#repairs.inc({ mode: this.#options.mode });
    this.#logRepair(damage);
  }

  async #compare(state: DualStackState): Promise<Damage> {
    const { read, mode } = this.#options;
    if (!read) return { unknown: `no comparison for this ${mode} dataplane (not the kernel's)` };
    try {
      const report = await read(state);
      this.#setPieces(report.pieces);
      return { report };
    } catch (error) {
      return { unknown: `the comparison failed: ${error instanceof Error ? error.message : String(error)}` };
    }
  }

  #setPieces(pieces: readonly DriftPiece[] | undefined): void {
    const counts = countByKind(pieces ?? []);
    for (const kind of DRIFT_KINDS) this.#pieces.set({ mode: this.#options.mode, kind }, counts[kind]);
  }

  #logRepair(damage: Damage): void {
    const { logger, mode } = this.#options;
    if ('unknown' in damage || damage.report.pieces.length === 0) {
      const why =
        'unknown' in damage ? damage.unknown : 'the comparison saw no piece differ (a canary, a nonce)';
      logger.warn({ mode, reason: why }, 'repaired rules the integrity check found damaged');
    } else {
      for (const [service, pieces] of byService(damage.report.pieces))
        logger.warn({ mode, service, repaired: pieces.map(repairedText) }, 'repaired drifted rules');
    }
    for (const rule of 'report' in damage ? damage.report.foreign : [])
      if (rule.hits.length > 0)
        logger.warn(
          { mode, where: rule.where, rule: rule.text, services: rule.hits },
          "a rule of another owner drops or rejects Service packets; not kproxy's to repair",
        );
  }
}

function byService(pieces: readonly DriftPiece[]): Map<string, DriftPiece[]> {
  const grouped = new Map<string, DriftPiece[]>();
  for (const piece of pieces) grouped.set(piece.service, [...(grouped.get(piece.service) ?? []), piece]);
  return grouped;
}

/** A piece as `kproxy diff` prints it, on one line. */
function repairedText(piece: DriftPiece): string {
  return piece.expected === undefined
    ? pieceText(piece)
    : `${pieceText(piece)} (kproxy holds ${piece.expected})`;
}
