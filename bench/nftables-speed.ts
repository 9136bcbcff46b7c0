// nftables section, at N services × E endpoints, all inside throwaway namespaces:
// - the bare `nft -f` load of kproxy's own full ruleset (rendered beforehand) into a fresh
//   namespace, as one transaction and as the cold-start transactions kproxy sends;
// - kproxy's cold start (NftablesDataplane start + full sync of a built state) into another;
// - one endpoint change end to end (ModelCache update + incremental sync), median of several, and
//   the elements its nft transactions add or delete (O(1) per change: endpoint-slots.ts);
// - RSS of this process right after the sync, and settled: after the daemon's last-resort gc and
//   idling (model and dataplane record: the cluster objects are released once the model has
//   them, as the daemon's informers keep none of them);
// - TCP connect latency from the node namespace to the first and the last service;
// - kproxy's cold start and one endpoint change with the netlink element writer, as the daemon
//   runs them (its socket lives in the process's namespace, so bench/nftables-netlink.ts runs them
//   in a child inside a namespace of its own): the `netlink*` figures, the curve's nftables points;
//   the in-process figures above are the nft-text path's (the daemon's full syncs on a node with
//   our tables, and the writer's fallback).
// - the drift check (issue 32: the daemon's when its integrity check finds damage, `kproxy diff`)
//   against the bare load's namespace with one element deleted, against a bare `nft list ruleset`
//   there;
// --wide: one Service with --endpoints endpoints (in slices of 100) instead of N services.
//   node --expose-gc bench/nftables-speed.ts [--services 30000] [--endpoints 10] [--wide]
//     [--changes 21] [--cold-start-chunk 100000] [--scheduler sh|mh]
// --scheduler: ipvs.scheduler's nftables counterpart (dataplanes/nftables/scheduler.ts) in the
//   nft-text figures; the netlink figures are left out (their child runs the default).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { DualStackState } from '../contract/proxy-state.ts';
import { coldStartTransactions } from '../dataplanes/nftables/cold-start.ts';
import { desiredRuleset } from '../dataplanes/nftables/desired-ruleset.ts';
import { nftablesDriftReader } from '../dataplanes/nftables/drift.ts';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { endpointHashApplier, schedulerChoice } from '../dataplanes/nftables/scheduler.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import { fullTransaction } from '../dataplanes/shared/nft/full-transaction.ts';
import { Lab } from '../harness/netns.ts';
import { heapReleaser } from '../src/daemon/release-memory.ts';
import { loadedModel } from './bench-model.ts';
import {
  ElementCountingNftRunner,
  idleMemoryMiB,
  median,
  reportSection,
  round,
  settledMemoryMiB,
  TimedNftRunner,
  timeMs,
} from './measure.ts';
import { nftablesNetlinkFigures } from './nftables-netlink-child.ts';
import { firstLastConnectUs } from './service-latency.ts';
import {
  type ClusterShape,
  changedSlice,
  changePairs,
  type SyntheticCluster,
  shapedCluster,
  syntheticService,
} from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '30000' },
    endpoints: { type: 'string', default: '10' },
    wide: { type: 'boolean', default: false },
    changes: { type: 'string', default: '21' },
    connects: { type: 'string', default: '300' },
    'cold-start-chunk': { type: 'string', default: '100000' },
    scheduler: { type: 'string' },
  },
});
const shape: ClusterShape = {
  services: values.wide ? 1 : Number(values.services),
  endpointsPerService: Number(values.endpoints),
  wide: values.wide,
};
const { services, endpointsPerService: endpoints } = shape;
/** Idle time before the settled memory figure (a daemon between syncs). */
const IDLE_SECONDS = 10;
/** The dataplane's piece size (its default: 100k elements); the bare chunked load uses the same. */
const COLD_START_CHUNK = Number(values['cold-start-chunk']);

/**
 * kproxy's full ruleset for `state` as nft scripts: one file, and the cold-start transactions. A
 * function of its own so the rendered ruleset is garbage before memory is measured.
 */
function writeBareFiles(state: DualStackState, dir: string): { single: string; chunks: string[] } {
  const desired = desiredRuleset(state);
  const single = join(dir, 'full.nft');
  writeFileSync(single, fullTransaction(desired).toString());
  const pieces = [...coldStartTransactions(state, COLD_START_CHUNK)].filter((tx) => tx !== undefined);
  const chunks = pieces.map((tx, i) => {
    const file = join(dir, `chunk-${i}.nft`);
    writeFileSync(file, tx.toString());
    return file;
  });
  return { single, chunks };
}

/**
 * The writer's cold start and endpoint change, run in `ns` by bench/nftables-netlink.ts: what the
 * daemon does (`kproxy run` writes elements by netlink), so the curve's nftables points. Beside
 * them the path the elements took: a transaction whose batch exceeds one datagram goes to nft.
 */
async function netlinkFigures(ns: string, bareMs: number): Promise<Record<string, number>> {
  const figures = await nftablesNetlinkFigures(ns, shape, Number(values.changes));
  return {
    netlinkColdStartMs: figures.coldStartMs!,
    netlinkColdStartRatio: round(figures.coldStartMs! / bareMs, 2),
    netlinkKernelFloorMs: figures.kernelFloorMs!,
    netlinkBatches: figures.coldStartBatches!,
    netlinkColdStartBatchMs: figures.coldStartBatchMs!,
    netlinkColdStartNftMs: figures.coldStartNftMs!,
    netlinkColdStartElements: figures.coldStartNetlinkElements!,
    netlinkColdStartNftElements: figures.coldStartNftElements!,
    netlinkColdStartOversizeBatches: figures.coldStartOversizeBatches!,
    netlinkEndpointChangeMedianMs: figures.endpointChangeMedianMs!,
    netlinkEndpointChangeMinMs: figures.endpointChangeMinMs!,
    netlinkEndpointChangeMaxMs: figures.endpointChangeMaxMs!,
    netlinkEndpointChangeFirstMedianMs: figures.endpointChangeFirstMedianMs!,
    netlinkEndpointChangeWarmupRuns: figures.endpointChangeWarmupRuns!,
    netlinkEndpointChangeTransactionMedianMs: figures.endpointChangeTransactionMedianMs!,
    netlinkEndpointChangeNftCalls: figures.endpointChangeNftCalls!,
    netlinkEndpointChangeElements: figures.endpointChangeNetlinkElements!,
    netlinkEndpointChangesByNft: figures.endpointChangesByNft!,
    netlinkEndpointChangeOversizeBatches: figures.endpointChangeOversizeBatches!,
    ...countChangeFigures(figures),
  };
}

/** The count-changing kinds' figures of the child (changePairs), under the netlink prefix. */
function countChangeFigures(figures: Record<string, number>): Record<string, number> {
  if (shape.wide) return {};
  const out: Record<string, number> = {};
  for (const name of changePairs(shape).flatMap((pair) => [pair.there, pair.back]))
    for (const figure of ['MedianMs', 'TransactionMedianMs', 'Ratio'])
      out[`netlinkEndpointChange${name}${figure}`] = figures[`endpointChange${name}${figure}`]!;
  return out;
}

/**
 * The drift check against `ns`, which holds `state`'s full ruleset, after the first Service's
 * ClusterIP is deleted from @cluster-ips, and a bare `nft list ruleset` of `ns` (output discarded;
 * both through nsenter, as the reader's tools run). Its memory is not this process's to judge (it
 * holds the section's dataplane, model and garbage): docs/benchmarks.md has the daemon's.
 */
async function driftFigures(ns: string, state: DualStackState): Promise<Record<string, number>> {
  const clusterIP = syntheticService(0).spec!.clusterIP!;
  await lab.exec(ns, 'nft', ['delete', 'element', 'ip', 'kproxy', 'cluster-ips', `{ ${clusterIP} }`]);
  const enter = `--net=/run/netns/${ns}`;
  const bareListMs = await timeMs(
    () =>
      new Promise((resolve) =>
        spawn('nsenter', [enter, 'nft', 'list', 'ruleset'], { stdio: 'ignore' }).once('close', resolve),
      ),
  );
  const read = nftablesDriftReader(execaRunner(['nsenter', enter]), values.scheduler);
  let pieces = 0;
  const checkMs = await timeMs(async () => {
    pieces = (await read(state)).pieces.length;
  });
  if (pieces !== 1) throw new Error(`the drift check found ${pieces} pieces, not the one deleted`);
  return { driftCheckMs: round(checkMs), driftBareListMs: round(bareListMs) };
}

const lab = new Lab(`bench-nft-${process.pid}`);
const { endpointHash } = schedulerChoice(values.scheduler);
const withHash = endpointHashApplier(endpointHash);
const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-nft-'));
try {
  let cluster: SyntheticCluster | undefined = shapedCluster(shape);
  const clusterMemory = settledMemoryMiB();
  const model = loadedModel(cluster);
  cluster = undefined;
  let state: DualStackState = {};
  const modelFullMs = await timeMs(() => {
    state = withHash(model.update().state);
  });
  const modelMemory = settledMemoryMiB();

  const nodeNs = await lab.addNetns('node');
  // nsenter only enters the network namespace and execs the tool: close to the daemon, which runs
  // inside the node's namespace (`ip netns exec` would add a mount namespace and a /sys remount).
  const runner = execaRunner(['nsenter', `--net=/run/netns/${nodeNs}`]);
  const counted = new ElementCountingNftRunner(commandNftRunner(runner));
  const nft = new TimedNftRunner(counted);
  const dataplane = new NftablesDataplane({
    nft,
    commands: runner,
    coldStartChunk: COLD_START_CHUNK,
    endpointHash,
  });
  const coldStartMs = await timeMs(async () => {
    await dataplane.start();
    await dataplane.sync(state, 'full');
  });
  // The rules are in the kernel; the fragment indexes are still being built (see live.ts).
  const coldStartIndexMs = await timeMs(() => dataplane.settled());
  const memory = settledMemoryMiB();
  // What the daemon does after a full sync of this size (made here, at the peak: so at any growth),
  // then what it holds between syncs.
  heapReleaser(0)();
  const settled = await idleMemoryMiB(IDLE_SECONDS);

  // After the memory figures: the whole rendered ruleset would raise this process's peak.
  const { single, chunks } = writeBareFiles(state, dir);
  const bareNs = await lab.addNetns('bare');
  const bareMs = await timeMs(() => lab.exec(bareNs, 'nft', ['-f', single]));
  const chunkNs = await lab.addNetns('chunks');
  const bareChunksMs = await timeMs(async () => {
    for (const file of chunks) await lab.exec(chunkNs, 'nft', ['-f', file]);
  });

  // One endpoint of the middle service (slice) toggles between two pod IPs: every run is a real change.
  const changeMs: number[] = [];
  const changeModelMs: number[] = [];
  const changeToolMs: number[] = [];
  const changeToolCalls: number[] = [];
  const changeElements: number[] = [];
  counted.counting = true;
  for (let run = 0; run < Number(values.changes); run++) {
    let modelMs = 0;
    changeMs.push(
      await timeMs(async () => {
        const start = performance.now();
        nft.reset();
        counted.elements = 0;
        model.setEndpointSlice(changedSlice(shape, run + 1));
        const update = model.update();
        modelMs = performance.now() - start;
        const outcome = await dataplane.sync(withHash(update.state), 'incremental', update.changed);
        if (outcome.kind !== 'incremental') throw new Error('the endpoint change fell back to a full sync');
      }),
    );
    changeModelMs.push(modelMs);
    changeToolMs.push(nft.ms);
    changeToolCalls.push(nft.calls);
    changeElements.push(counted.elements);
  }
  counted.counting = false;

  // The floor of any change made by spawning nft: one `nft -f -` with nothing to do, same runner.
  const floorMs: number[] = [];
  for (let run = 0; run < Number(values.changes); run++) {
    floorMs.push(await timeMs(() => runner.run('nft', ['-f', '-'], '')));
  }

  const connect = await firstLastConnectUs(lab, nodeNs, services, Number(values.connects));
  const netlink = endpointHash ? {} : await netlinkFigures(await lab.addNetns('netlink'), bareMs);
  // `state` is still what bareNs holds: the model's states are snapshots (the daemon compares the
  // one it last synced).
  const drift = await driftFigures(bareNs, state);

  reportSection({
    services,
    endpointsPerService: endpoints,
    wide: shape.wide,
    scheduler: values.scheduler ?? 'rr',
    modelFullMs: round(modelFullMs),
    bareLoadMs: round(bareMs),
    bareChunkedLoadMs: round(bareChunksMs),
    coldStartTransactions: chunks.length,
    coldStartChunk: COLD_START_CHUNK,
    coldStartMs: round(coldStartMs),
    coldStartIndexMs: round(coldStartIndexMs),
    rssAfterSyncMiB: memory.rssMiB,
    heapAfterSyncMiB: memory.heapMiB,
    externalAfterSyncMiB: memory.externalMiB,
    rssSettledMiB: settled.rssMiB,
    heapSettledMiB: settled.heapMiB,
    endpointChangeMedianMs: round(median(changeMs), 2),
    endpointChangeMinMs: round(Math.min(...changeMs), 2),
    endpointChangeMaxMs: round(Math.max(...changeMs), 2),
    endpointChangeModelMedianMs: round(median(changeModelMs), 2),
    endpointChangeToolMedianMs: round(median(changeToolMs), 2),
    endpointChangeToolCalls: median(changeToolCalls),
    endpointChangeElements: median(changeElements),
    nftProcessFloorMs: round(median(floorMs), 2),
    endpointChangeRuns: changeMs.length,
    heapClusterMiB: clusterMemory.heapMiB,
    heapModelMiB: modelMemory.heapMiB,
    rssModelMiB: modelMemory.rssMiB,
    ...connect,
    ...netlink,
    ...drift,
  });
} finally {
  await lab.destroy();
  rmSync(dir, { recursive: true, force: true });
}
