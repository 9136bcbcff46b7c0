// The nftables element writer (netlink batches) at N services x E endpoints, run INSIDE a throwaway
// network namespace (the netlink socket is opened in this process's namespace):
//   ip netns add x && nsenter --net=/run/netns/x node --expose-gc bench/nftables-netlink.ts
// Measures the bare `nft -f` load of kproxy's full ruleset (unless --skip-bare: the sections that
// start this, through bench/nftables-netlink-child.ts, measure it themselves or need none), then
// kproxy's cold start with the writer, and one endpoint change end to end (median; --changes 0:
// none; beside it the median of the process's CPU time over each change, which a busy machine
// stretches less than wall time), in that namespace. Beside each, the path its elements took: a transaction the writer
// cannot split, or whose batch exceeds one datagram, goes to nft whole (netlink-elements.ts), so
// the elements nft wrote are counted, and the batches too big.
// Last, the kernel's floor for that cold start (issue 33): the table deleted, the same steps again
// with nothing of kproxy's in between: its nft scripts by nft, and its element batches, already
// encoded, sent as they are by the netlink socket alone (netlink-socket.ts: it numbers the
// messages in place and waits for the acknowledgement). The cold start's ratio to it is kproxy's
// own cost: the model's state, planning, encoding and the reads of adoption.
// --wide: one Service with --endpoints endpoints (in slices of 100) instead of N services.
// The median is of the last --changes changes, after --warmup more (default 3,000: V8 optimises a
// function with TurboFan after --invocation-count-for-turbofan calls, 3,000 in Node 24, and the
// per-change functions are called at least once per change; at the churn section's 10 changes/s
// that is five minutes of a daemon's life; --wide's too, its changes now a few ms): a daemon
// runs optimised code for all but its first changes after a start, while the first ones run code
// still interpreted or tiering up (their median is reported beside it).
// Then (not with --wide) the changes that change the count (synthetic-cluster.ts's changePairs:
// an endpoint added and removed, one ready -> terminating and back, a Service scaled 1 -> 0 and
// back), --kind-changes of each, each kind's median end to end and its transactions' beside it,
// and its ratio to the replaced endpoint's median (issue 33: each < 0.5 ms at 30k, whatever the
// counts of the other Services).
//     [--services 30000] [--endpoints 10] [--wide] [--changes 21] [--warmup N] [--skip-bare]
//     [--send-buffer N] [--kind-changes 7]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { DualStackState } from '../contract/proxy-state.ts';
import { familySets } from '../dataplanes/nftables/base-objects.ts';
import { desiredRuleset } from '../dataplanes/nftables/desired-ruleset.ts';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { commandNftRunner, type NftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import {
  type NetlinkDatagram,
  NetlinkSocket,
  openNetfilterNetlink,
} from '../dataplanes/shared/netlink-socket.ts';
import { fullTransaction } from '../dataplanes/shared/nft/full-transaction.ts';
import { NetlinkElementWriter, SEND_BUFFER } from '../dataplanes/shared/nft/netlink-elements.ts';
import { TABLE } from '../dataplanes/shared/nft/transaction.ts';
import type { EndpointSlice } from '../src/kube/objects.ts';
import { loadedModel } from './bench-model.ts';
import { ElementCountingNftRunner, median, reportSection, round, TimedNftRunner, timeMs } from './measure.ts';
import {
  type ChangePair,
  type ClusterShape,
  changedSlice,
  changePairs,
  shapedCluster,
} from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '30000' },
    endpoints: { type: 'string', default: '10' },
    wide: { type: 'boolean', default: false },
    changes: { type: 'string', default: '21' },
    warmup: { type: 'string' },
    'skip-bare': { type: 'boolean', default: false },
    /** SO_SNDBUF to ask for (default: as much as the kernel gives; 212992 is Debian's wmem_max). */
    'send-buffer': { type: 'string' },
    'kind-changes': { type: 'string', default: '7' },
  },
});
const shape: ClusterShape = {
  services: values.wide ? 1 : Number(values.services),
  endpointsPerService: Number(values.endpoints),
  wide: values.wide,
};

/**
 * What `writer` does for the dataplane, added up: its batches' time (sent to the kernel's
 * answers) and elements, and the batches that exceeded one datagram (their transactions went to
 * nft whole).
 */
function writerStats(writer: NetlinkElementWriter) {
  const stats = { ms: 0, elements: 0, oversize: 0 };
  const write = writer.write.bind(writer);
  writer.write = async (split, batch) => {
    const start = performance.now();
    try {
      await write(split, batch);
    } finally {
      stats.ms += performance.now() - start;
    }
    for (const op of split.ops) stats.elements += op.verb === 'flush' ? 0 : op.elements.length;
  };
  const batchSteps = writer.batchSteps.bind(writer);
  writer.batchSteps = function* (split) {
    const batch = yield* batchSteps(split);
    if (batch === undefined) stats.oversize++;
    return batch;
  };
  return stats;
}

/** A step of the cold start as the kernel met it: an nft script, or an element batch. */
type ColdStartStep = { readonly nft: string } | { readonly batch: NetlinkDatagram };

/**
 * Records the steps that change the kernel, in order, while `recording`: the scripts `nft` runs
 * (not its listings) and the batches `writer` sends.
 */
function recordSteps(nft: NftRunner, writer: NetlinkElementWriter) {
  const steps = { recording: true, list: [] as ColdStartStep[] };
  const run = nft.run.bind(nft);
  nft.run = async (script) => {
    if (steps.recording) steps.list.push({ nft: script });
    await run(script);
  };
  const write = writer.write.bind(writer);
  writer.write = async (split, batch) => {
    if (steps.recording) steps.list.push({ batch: batch.datagram });
    await write(split, batch);
  };
  return steps;
}

/** The steps again, bare: nft for the scripts, the socket alone for the batches (sendBuffer as the writer's). */
async function replay(
  steps: readonly ColdStartStep[],
  nft: NftRunner,
  sendBuffer: number | undefined,
): Promise<number> {
  const socket = new NetlinkSocket(openNetfilterNetlink(sendBuffer ?? SEND_BUFFER), 120_000);
  try {
    return await timeMs(async () => {
      for (const step of steps) {
        if ('nft' in step) await nft.run(step.nft);
        else if ((await socket.send(step.batch)).refused.size > 0)
          throw new Error('the floor: a batch was refused');
      }
    });
  } finally {
    socket.close();
  }
}

/** User and system CPU time of a `process.cpuUsage` difference: on a busy machine, what wall time is not. */
function cpuMs(used: NodeJS.CpuUsage): number {
  return (used.user + used.system) / 1000;
}

/** V8's `--invocation-count-for-turbofan` default (`node --v8-options`). */
const TURBOFAN_INVOCATIONS = 3000;

const model = loadedModel(shapedCluster(shape));
let state: DualStackState = model.update().state;
const runner = execaRunner([]);
const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-nl-'));
try {
  let bareMs: number | undefined;
  if (!values['skip-bare']) {
    const file = join(dir, 'full.nft');
    writeFileSync(file, fullTransaction(desiredRuleset(state)).toString());
    bareMs = await timeMs(() => runner.run('nft', ['-f', file]));
    await runner.run('nft', ['delete', 'table', 'ip', TABLE]);
    rmSync(file);
  }

  const sendBuffer = values['send-buffer'];
  const elements = NetlinkElementWriter.open(
    TABLE,
    familySets,
    sendBuffer === undefined ? undefined : Number(sendBuffer),
  );
  const stats = writerStats(elements);
  const counted = new ElementCountingNftRunner(commandNftRunner(runner));
  counted.counting = true;
  const nft = new TimedNftRunner(counted);
  const steps = recordSteps(nft, elements);
  const dataplane = new NftablesDataplane({ nft, commands: runner, elements });
  const coldStartMs = await timeMs(async () => {
    await dataplane.start();
    await dataplane.sync(state, 'full');
  });
  steps.recording = false;
  const coldStart = { nftMs: nft.ms, nftElements: counted.elements, ...stats, batches: elements.batches };
  await dataplane.settled();
  // One endpoint of the middle service (slice) toggles between two pod IPs, as in nftables-speed.ts.
  const measured = Number(values.changes);
  const warmup = measured === 0 ? 0 : Number(values.warmup ?? TURBOFAN_INVOCATIONS);
  const changeMs: number[] = [];
  const changeCpuMs: number[] = [];
  const changeTransactionMs: number[] = [];
  const changeNftCalls: number[] = [];
  const changeNetlinkElements: number[] = [];
  let changesByNft = 0;
  let changeOversize = 0;
  /**
   * One change to `slice` end to end, and what it sent: its transactions' time, nft calls,
   * elements by netlink and by nft, batches too big for one datagram.
   */
  const change = async (slice: EndpointSlice) => {
    nft.reset();
    counted.elements = 0;
    Object.assign(stats, { ms: 0, elements: 0, oversize: 0 });
    // Changes reach a daemon as separate events, never two in one turn of its event loop.
    await setImmediate();
    const cpu = process.cpuUsage();
    const ms = await timeMs(async () => {
      model.setEndpointSlice(slice);
      const update = model.update();
      state = update.state;
      const outcome = await dataplane.sync(update.state, 'incremental', update.changed);
      if (outcome.kind !== 'incremental') throw new Error('the endpoint change fell back to a full sync');
    });
    return {
      ms,
      cpuMs: cpuMs(process.cpuUsage(cpu)),
      transactionMs: nft.ms + stats.ms,
      nftCalls: nft.calls,
      netlinkElements: stats.elements,
      nftElements: counted.elements,
      oversize: stats.oversize,
    };
  };
  for (let run = 0; run < warmup + measured; run++) {
    // The slice is the API server's side: built outside the timed change.
    const done = await change(changedSlice(shape, run + 1));
    changeMs.push(done.ms);
    changeCpuMs.push(done.cpuMs);
    changeTransactionMs.push(done.transactionMs);
    changeNftCalls.push(done.nftCalls);
    changeNetlinkElements.push(done.netlinkElements);
    if (done.nftElements > 0) changesByNft++;
    changeOversize += done.oversize;
  }
  const kindChanges = shape.wide || measured === 0 ? 0 : Number(values['kind-changes']);
  const kinds: Record<string, number> = {};
  const replacedMs = changeMs.length > 0 ? median(changeMs.slice(warmup)) : 0;
  const record = (name: string, runs: readonly { ms: number; transactionMs: number }[]) => {
    const ms = median(runs.map((r) => r.ms));
    kinds[`endpointChange${name}MedianMs`] = round(ms, 3);
    kinds[`endpointChange${name}TransactionMedianMs`] = round(median(runs.map((r) => r.transactionMs)), 3);
    kinds[`endpointChange${name}Ratio`] = round(ms / replacedMs, 1);
  };
  for (const pair of kindChanges > 0 ? changePairs(shape) : ([] as ChangePair[])) {
    await change(pair.from);
    const there: Awaited<ReturnType<typeof change>>[] = [];
    const back: Awaited<ReturnType<typeof change>>[] = [];
    for (let run = 0; run < kindChanges; run++) {
      there.push(await change(pair.to));
      back.push(await change(pair.from));
    }
    record(pair.there, there);
    record(pair.back, back);
  }
  elements.close();
  for (const family of ['ip', 'ip6']) await runner.run('nft', ['delete', 'table', family, TABLE]);
  globalThis.gc?.();
  const floorMs = await replay(
    steps.list,
    commandNftRunner(runner),
    sendBuffer === undefined ? undefined : Number(sendBuffer),
  );
  reportSection({
    services: shape.services,
    endpointsPerService: shape.endpointsPerService,
    wide: shape.wide,
    batchBytes: elements.maxBytes,
    ...(bareMs === undefined
      ? {}
      : { bareLoadMs: round(bareMs), coldStartRatio: round(coldStartMs / bareMs, 2) }),
    coldStartMs: round(coldStartMs),
    kernelFloorMs: round(floorMs),
    coldStartFloorRatio: round(coldStartMs / floorMs, 2),
    coldStartNftMs: round(coldStart.nftMs),
    coldStartBatches: coldStart.batches,
    coldStartBatchMs: round(coldStart.ms),
    coldStartNetlinkElements: coldStart.elements,
    coldStartNftElements: coldStart.nftElements,
    coldStartOversizeBatches: coldStart.oversize,
    // --changes 0 (the kubeproxyshape section: the cold start only): no change figures at all.
    ...(changeMs.length === 0
      ? {}
      : {
          endpointChangeMedianMs: round(median(changeMs.slice(warmup)), 3),
          endpointChangeMinMs: round(Math.min(...changeMs.slice(warmup)), 3),
          endpointChangeMaxMs: round(Math.max(...changeMs.slice(warmup)), 3),
          endpointChangeFirstMedianMs: round(median(changeMs.slice(0, measured)), 3),
          endpointChangeCpuMedianMs: round(median(changeCpuMs.slice(warmup)), 3),
          endpointChangeWarmupRuns: warmup,
          endpointChangeTransactionMedianMs: round(median(changeTransactionMs.slice(warmup)), 3),
          endpointChangeNftCalls: median(changeNftCalls.slice(warmup)),
          endpointChangeNetlinkElements: median(changeNetlinkElements.slice(warmup)),
          endpointChangesByNft: changesByNft,
          endpointChangeOversizeBatches: changeOversize,
        }),
    endpointChangeRuns: measured,
    ...kinds,
    ...(kindChanges > 0 ? { endpointChangeKindRuns: kindChanges } : {}),
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
