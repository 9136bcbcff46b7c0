// iptables section (nft backend), at N services × E endpoints, inside throwaway namespaces:
// - full: one bare (flushing) `iptables-nft-restore` of kproxy's full ruleset, rendered beforehand,
//   into a fresh namespace, vs kproxy's full sync (IptablesDataplane start + sync) into another;
// - partial: one endpoint change, a bare restore of exactly the chains kproxy's partial plan
//   rewrites, into a namespace loaded by a kproxy full sync (and, for comparison, into the one
//   loaded by the bare restore), vs kproxy's incremental sync of the same change (ModelCache
//   update + plan + restore + its canary check); then the same restores once more into the
//   flush-loaded namespace with the jumps from the built-in chains deleted: the kernel's cost
//   without the walk it makes on every commit that adds a rule (see below);
// - TCP connect latency from the node namespace to the first and the last service.
// --wide: one Service with --endpoints endpoints (in slices of 100) instead of N services.
// --affinity: every Service with sessionAffinity ClientIP (its per-endpoint checks in the SVC chain).
//   node --expose-gc bench/iptables-speed.ts [--services 10000] [--endpoints 10] [--wide]
//     [--affinity] [--changes 5] [--connects 300]
import { parseArgs } from 'node:util';
import type { LiveDataplane, SyncOutcome } from '../contract/dataplane.ts';
import type { DualStackState } from '../contract/proxy-state.ts';
import { JUMP_RULES } from '../dataplanes/iptables/jump-rules.ts';
import { IptablesDataplane } from '../dataplanes/iptables/live.ts';
import { iptablesPlanner, planFamilyIncremental } from '../dataplanes/iptables/planner.ts';
import { restoreInput } from '../dataplanes/iptables/restore-plan.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import { Lab } from '../harness/netns.ts';
import { loadedModel } from './bench-model.ts';
import { median, reportSection, round, TimedRunner, timeMs } from './measure.ts';
import { firstLastConnectUs } from './service-latency.ts';
import { type ClusterShape, changedSlice, shapedCluster, withClientIPAffinity } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    wide: { type: 'boolean', default: false },
    affinity: { type: 'boolean', default: false },
    changes: { type: 'string', default: '5' },
    connects: { type: 'string', default: '300' },
  },
});
const shape: ClusterShape = {
  services: values.wide ? 1 : Number(values.services),
  endpointsPerService: Number(values.endpoints),
  wide: values.wide,
};
const { services, endpointsPerService: endpoints } = shape;
const RESTORE = 'iptables-nft-restore';

/**
 * The bound on one bare tool run: past 10k services a flushing restore of the whole ruleset
 * outlasts the daemon's 120 s (command-runner.ts), and the curve wants its time.
 */
const BARE_TOOL_TIMEOUT_MS = 30 * 60_000;

/** Runs tools inside a namespace the way the daemon does from inside it (see nftables-speed.ts). */
const inside = (ns: string) => execaRunner(['nsenter', `--net=/run/netns/${ns}`]);
const bareInside = (ns: string) =>
  execaRunner(['nsenter', `--net=/run/netns/${ns}`], { timeoutMs: () => BARE_TOOL_TIMEOUT_MS });

/** kproxy's full sync failed (as the daemon's would: its own tool timeouts): no more to measure. */
class FullSyncFailed extends Error {}

/** `noflush` false: the plain (flushing) restore the kernel baseline timed, fast on iptables-nft. */
async function restore(ns: string, input: string, noflush: boolean): Promise<void> {
  const result = await bareInside(ns).run(RESTORE, noflush ? ['--noflush', '--wait'] : ['--wait'], input);
  if (result.exitCode !== 0) throw new Error(`${RESTORE} failed: ${result.stderr}`);
}

const lab = new Lab(`bench-ipt-${process.pid}`);
let figures: Record<string, unknown> = {
  services,
  endpointsPerService: endpoints,
  wide: shape.wide,
  affinity: values.affinity,
};
try {
  const cluster = values.affinity ? withClientIPAffinity(shapedCluster(shape)) : shapedCluster(shape);
  const model = loadedModel(cluster);
  let state: DualStackState = model.update().state;

  const fullInput = restoreInput(iptablesPlanner.planFull(state).IPv4!);
  const bareNs = await lab.addNetns('bare');
  const bareFullMs = await timeMs(() => restore(bareNs, fullInput, false));
  figures = { ...figures, restoreBytes: fullInput.length, bareFullRestoreMs: round(bareFullMs) };

  const nodeNs = await lab.addNetns('node');
  const runner = new TimedRunner(inside(nodeNs));
  const dataplane: LiveDataplane = new IptablesDataplane({ runner, backend: 'nft' });
  const fullSyncMs = await timeMs(async () => {
    await dataplane.start();
    await dataplane.sync(state, 'full');
  }).catch((error: unknown) => {
    throw new FullSyncFailed((error as Error).message);
  });

  // The same ruleset loaded the way kproxy loads it (a full sync), for a bare restore of the changed
  // chains into the same kernel state: on iptables-nft that restore costs several times more there
  // than in the namespace loaded by one flushing restore (both are reported).
  const twinNs = await lab.addNetns('twin');
  const twin: LiveDataplane = new IptablesDataplane({ runner: inside(twinNs), backend: 'nft' });
  await twin.start();
  await twin.sync(state, 'full');

  const bareChangeMs: number[] = [];
  const twinChangeMs: number[] = [];
  const changeMs: number[] = [];
  const changeToolMs: number[] = [];
  const changeToolCalls: number[] = [];
  const changeInputs: string[] = [];
  let toolBreakdown: Record<string, number> = {};
  for (let run = 0; run < Number(values.changes); run++) {
    const prev = state;
    let outcome: SyncOutcome | undefined;
    changeMs.push(
      await timeMs(async () => {
        runner.reset();
        model.setEndpointSlice(changedSlice(shape, run + 1));
        const update = model.update();
        state = update.state;
        outcome = await dataplane.sync(update.state, 'incremental', update.changed);
      }),
    );
    changeToolMs.push(runner.ms);
    changeToolCalls.push(runner.calls);
    toolBreakdown = runner.byCommand;
    if (outcome?.kind !== 'incremental') throw new Error('the endpoint change fell back to a full sync');
    const partial = planFamilyIncremental(prev.IPv4, state.IPv4);
    const input = partial ? restoreInput(partial) : '';
    changeInputs.push(input);
    bareChangeMs.push(await timeMs(() => restore(bareNs, input, true)));
    twinChangeMs.push(await timeMs(() => restore(twinNs, input, true)));
  }

  // A commit that adds a rule to a table makes the kernel validate every chain reachable from the
  // table's built-in chains (nft_table_validate: ~80% of a partial restore at 10k in `perf`), so a
  // partial restore costs what the whole reachable ruleset costs to walk, however the table was
  // built. Without the jumps from the built-in chains nothing is reachable: what remains is the
  // restore's own cost. The same inputs again (each rewrites its chains whole, so they repeat).
  for (const jump of JUMP_RULES) {
    const result = await inside(bareNs).run('iptables-nft', [
      '-t',
      jump.table,
      '-D',
      jump.from,
      ...jump.spec,
    ]);
    if (result.exitCode !== 0) throw new Error(`iptables-nft -D failed: ${result.stderr}`);
  }
  const unhookedChangeMs: number[] = [];
  for (const input of changeInputs) unhookedChangeMs.push(await timeMs(() => restore(bareNs, input, true)));

  // Through kproxy's own table (the node namespace's), after the timed syncs.
  const connect = await firstLastConnectUs(lab, nodeNs, services, Number(values.connects));

  reportSection({
    ...figures,
    fullSyncMs: round(fullSyncMs),
    bareChangedChainsRestoreMs: round(median(twinChangeMs), 2),
    bareChangedChainsRestoreFlushLoadedMs: round(median(bareChangeMs), 2),
    bareChangedChainsRestoreUnhookedMs: round(median(unhookedChangeMs), 2),
    partialSyncMs: round(median(changeMs), 2),
    partialSyncToolMs: round(median(changeToolMs), 2),
    partialSyncToolCalls: median(changeToolCalls),
    partialSyncLastToolMs: Object.fromEntries(Object.entries(toolBreakdown).map(([k, v]) => [k, round(v)])),
    changeRuns: changeMs.length,
    ...connect,
  });
} catch (error) {
  if (!(error instanceof FullSyncFailed)) throw error;
  reportSection({ ...figures, fullSyncFailed: error.message });
} finally {
  await lab.destroy();
}
