// The drift check's longest turn of the event loop (by hand, not in `npm run bench`): what the daemon
// runs when its integrity check finds damage must leave /healthz answered, like a full sync. A
// throwaway namespace holds kproxy's full ruleset of N services × 10 endpoints (nftables, or
// iptables on iptables-nft or -legacy) and another owner's hook rule (so the foreign rules are
// judged, the costliest path); the mode's drift reader runs against it while a 2 ms timer records
// each gap between its ticks, in wall time and in the main thread's CPU time (the wall time counts
// the machine's other load, the CPU time only this process's own work). `--of sync` measures the
// first full sync instead.
//   node bench/drift-turns.ts [--services 3000] [--mode nftables|iptables|iptables-legacy] [--of drift|sync]
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { iptablesDriftReader } from '../dataplanes/iptables/drift.ts';
import { IptablesDataplane } from '../dataplanes/iptables/live.ts';
import { nftablesDriftReader } from '../dataplanes/nftables/drift.ts';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import type { DriftReader } from '../dataplanes/shared/drift/drift-report.ts';
import { Lab } from '../harness/netns.ts';
import { loadedModel } from './bench-model.ts';
import { reportSection, round } from './measure.ts';
import { shapedCluster } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '3000' },
    mode: { type: 'string', default: 'nftables' },
    of: { type: 'string', default: 'drift' },
  },
});
const mode = values.mode;
if (mode !== 'nftables' && mode !== 'iptables' && mode !== 'iptables-legacy') {
  console.error(`drift-turns: --mode ${mode}: nftables, iptables or iptables-legacy`);
  process.exit(2);
}
if (values.of !== 'drift' && values.of !== 'sync') {
  console.error(`drift-turns: --of ${values.of}: drift or sync`);
  process.exit(2);
}

/** Runs `work` while a 2 ms timer records the longest gap between its ticks, wall and CPU. */
async function longestTurn<T>(work: () => Promise<T>) {
  let [lastWall, lastCpu] = [performance.now(), cpuMs()];
  let [longestWall, longestCpu] = [0, 0];
  const timer = setInterval(() => {
    const [wall, cpu] = [performance.now(), cpuMs()];
    longestWall = Math.max(longestWall, wall - lastWall);
    longestCpu = Math.max(longestCpu, cpu - lastCpu);
    [lastWall, lastCpu] = [wall, cpu];
  }, 2);
  const start = performance.now();
  const result = await work();
  clearInterval(timer);
  return {
    result,
    ms: round(performance.now() - start),
    longestTurnWallMs: round(longestWall),
    longestTurnCpuMs: round(longestCpu),
  };
}

/** The main thread's CPU time, ms. */
function cpuMs(): number {
  const usage = process.threadCpuUsage();
  return (usage.user + usage.system) / 1000;
}

const lab = new Lab(`bench-drift-${process.pid}`);
try {
  const model = loadedModel(
    shapedCluster({ services: Number(values.services), endpointsPerService: 10, wide: false }),
  );
  const state = model.update().state;
  const ns = await lab.addNetns('node');
  const runner = execaRunner(['nsenter', `--net=/run/netns/${ns}`]);
  const backend = mode === 'iptables-legacy' ? 'legacy' : 'nft';
  const dataplane =
    mode === 'nftables'
      ? new NftablesDataplane({ nft: commandNftRunner(runner), commands: runner })
      : new IptablesDataplane({ runner, backend });
  await dataplane.start();
  const synced = await longestTurn(() => dataplane.sync(state, 'full'));
  const size = { mode, services: Number(values.services) };
  if (values.of === 'sync') {
    reportSection({
      ...size,
      of: 'full sync',
      ms: synced.ms,
      longestTurnWallMs: synced.longestTurnWallMs,
      longestTurnCpuMs: synced.longestTurnCpuMs,
    });
  } else {
    let read: DriftReader;
    if (dataplane instanceof NftablesDataplane) {
      await dataplane.settled();
      await lab.exec(ns, 'nft', [
        'add table ip guard; add chain ip guard out { type filter hook output priority 0 ; }; add rule ip guard out ip daddr 192.0.2.99 drop',
      ]);
      read = nftablesDriftReader(runner, undefined);
    } else {
      await lab.exec(ns, `iptables-${backend}`, ['-A', 'OUTPUT', '-d', '192.0.2.99', '-j', 'DROP']);
      read = iptablesDriftReader(runner);
    }
    const checked = await longestTurn(() => read(state));
    reportSection({
      ...size,
      driftCheckMs: checked.ms,
      longestTurnWallMs: checked.longestTurnWallMs,
      longestTurnCpuMs: checked.longestTurnCpuMs,
      pieces: checked.result.pieces.length,
      foreignRules: checked.result.foreign.length,
    });
  }
} finally {
  await lab.destroy();
}
