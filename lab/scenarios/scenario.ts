// What a scenario is and how one runs: it writes objects through the lab, waits for the nodes to
// converge, and records checks with their evidence. Objects it wrote are deleted afterwards,
// whatever happened, so scenarios run one after another on the same lab.
import { setTimeout as sleep } from 'node:timers/promises';
import { compareText } from '../../contract/base/compare-text.ts';
import { allowance } from '../../harness/emulation.ts';
import type { KubeJson, LabDriver, LabPod, Outcome } from '../driver.ts';

export interface Check {
  readonly what: string;
  readonly passed: boolean;
  readonly evidence: string;
}

export interface ScenarioResult {
  readonly scenario: string;
  readonly passed: boolean;
  readonly checks: readonly Check[];
  /** How long each wait for the nodes to follow a change took: the sync latency seen. */
  readonly convergeMs: readonly number[];
  /** Set when the scenario could not finish (the lab failed, not a check). */
  readonly error?: string;
}

export interface Scenario {
  readonly name: string;
  /** One line: what behaviour it checks. */
  readonly title: string;
  run(run: ScenarioRun): Promise<void>;
}

/**
 * How long the nodes get to follow a change before a scenario calls it a failure: the watch
 * delivers it (milliseconds), the sync waits out minSyncPeriod (100 ms in the netns lab, kube-proxy's
 * 1 s default under Vagrant) and runs (under a second idle, a few seconds on a loaded machine). The
 * deadline bounds a hang; the time each check took is reported as the sync latency seen.
 */
const CONVERGE_TIMEOUT_MS = allowance(20_000);

export class ScenarioRun {
  readonly lab: LabDriver;
  readonly checks: Check[] = [];
  readonly convergeMs: number[] = [];
  readonly #written = new Map<string, KubeJson>();

  constructor(lab: LabDriver) {
    this.lab = lab;
  }

  async apply(...objects: KubeJson[]): Promise<void> {
    for (const object of objects) {
      await this.lab.apply(object);
      this.#written.set(`${object.kind}/${object.metadata.name}`, object);
    }
  }

  async remove(object: KubeJson): Promise<void> {
    await this.lab.remove(object);
    this.#written.delete(`${object.kind}/${object.metadata.name}`);
  }

  /** Deletes what the scenario wrote, slices first (as a controller would). */
  async removeAll(): Promise<void> {
    const written = [...this.#written.values()];
    const slicesFirst = [
      ...written.filter((o) => o.kind === 'EndpointSlice'),
      ...written.filter((o) => o.kind !== 'EndpointSlice'),
    ];
    for (const object of slicesFirst) await this.remove(object);
  }

  check(what: string, passed: boolean, evidence: string): boolean {
    this.checks.push({ what, passed, evidence });
    return passed;
  }

  /**
   * Probes until `done` holds and records a check with the time it took (the sync latency seen)
   * and the last probe's evidence; a failed one after CONVERGE_TIMEOUT_MS. Returns whether it
   * converged.
   */
  async converge<T>(
    what: string,
    probe: () => Promise<T>,
    done: (value: T) => boolean,
    describe: (value: T) => string,
  ): Promise<boolean> {
    const started = Date.now();
    for (;;) {
      const value = await probe();
      if (done(value)) {
        const took = Date.now() - started;
        this.convergeMs.push(took);
        return this.check(what, true, `after ${took} ms: ${describe(value)}`);
      }
      if (Date.now() - started > CONVERGE_TIMEOUT_MS) {
        return this.check(what, false, `not within ${CONVERGE_TIMEOUT_MS} ms; last seen: ${describe(value)}`);
      }
      await sleep(100);
    }
  }

  /** A pod that is not among `exclude`, to act as a client or a spare backend. */
  podOutside(exclude: readonly LabPod[]): LabPod {
    const pod = this.lab.pods().find((p) => !exclude.includes(p));
    if (!pod) throw new Error(`the lab needs a pod besides ${exclude.map((p) => p.name).join(', ')}`);
    return pod;
  }
}

export async function runScenario(lab: LabDriver, scenario: Scenario): Promise<ScenarioResult> {
  const run = new ScenarioRun(lab);
  let error: string | undefined;
  try {
    await scenario.run(run);
  } catch (caught) {
    error = caught instanceof Error ? caught.message : String(caught);
  } finally {
    await run.removeAll().catch((caught: unknown) => {
      error ??= `cleanup: ${caught instanceof Error ? caught.message : String(caught)}`;
    });
  }
  const passed = error === undefined && run.checks.length > 0 && run.checks.every((c) => c.passed);
  return {
    scenario: scenario.name,
    passed,
    checks: run.checks,
    convergeMs: run.convergeMs,
    ...(error === undefined ? {} : { error }),
  };
}

/** Which backends answered, with how often; failures counted as "error:<code>". Sorted by name. */
export function tallyBackends(outcomes: readonly Outcome[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const o of outcomes) {
    const key = 'error' in o ? `error:${o.error}` : o.backend;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return new Map([...counts].sort(([a], [b]) => compareText(a, b)));
}

export function describeTally(counts: ReadonlyMap<string, number>): string {
  return counts.size === 0 ? 'nothing' : [...counts].map(([k, n]) => `${k}×${n}`).join(', ');
}

/** True when exactly `expected` answered (each at least once) and nothing else, no failures. */
export function sameBackends(counts: ReadonlyMap<string, number>, expected: readonly LabPod[]): boolean {
  return counts.size === expected.length && expected.every((p) => counts.has(p.name));
}

/**
 * Connections to spread over n backends (each picked at random, 1 in n) so that missing one by
 * chance, n·(1 - 1/n)^k, is 1e-7 or rarer: 25 for 2, 43 for 3, 61 for 4. (10 per backend missed one
 * of 3-4 backends ~2-4e-5 of the time.) At least 12 when there is one.
 */
export function attemptsFor(backends: number): number {
  if (backends <= 1) return 12;
  return Math.max(12, Math.ceil(Math.log(1e-7 / backends) / Math.log(1 - 1 / backends)));
}
