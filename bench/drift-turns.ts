// The drift check's longest turn of the event loop (by hand, not in `npm run bench`): what the daemon
// runs when its integrity check finds damage must leave /healthz answered, like a full sync. A
// throwaway namespace holds kproxy's full ruleset of N services × 10 endpoints (nftables, or
// iptables on iptables-nft) and another owner's hook rule (so the foreign rules are judged, the
// costliest path); the mode's drift reader runs against it while a 2 ms timer records each gap
// between its ticks, in wall time and in the main thread's CPU time (the wall time counts the
// machine's other load, the CPU time only this process's own work).
//   node bench/drift-turns.ts [--services 3000] [--mode nftables|iptables]
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
  },
});
if (values.mode !== 'nftables' && values.mode !== 'iptables') {
  console.error(`drift-turns: --mode ${values.mode}: nftables or iptables`);
  process.exit(2);
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
  let read: DriftReader;
  if (values.mode === 'nftables') {
    const dataplane = new NftablesDataplane({ nft: commandNftRunner(runner), commands: runner });
    await dataplane.start();
    await dataplane.sync(state, 'full');
    await dataplane.settled();
    await lab.exec(ns, 'nft', [
      'add table ip guard; add chain ip guard out { type filter hook output priority 0 ; }; add rule ip guard out ip daddr 192.0.2.99 drop',
    ]);
    read = nftablesDriftReader(runner, undefined);
  } else {
    const dataplane = new IptablesDataplane({ runner, backend: 'nft' });
    await dataplane.start();
    await dataplane.sync(state, 'full');
    await lab.exec(ns, 'iptables-nft', ['-A', 'OUTPUT', '-d', '192.0.2.99', '-j', 'DROP']);
    read = iptablesDriftReader(runner);
  }
  let [lastWall, lastCpu] = [performance.now(), cpuMs()];
  let [longestWall, longestCpu] = [0, 0];
  const timer = setInterval(() => {
    const [wall, cpu] = [performance.now(), cpuMs()];
    longestWall = Math.max(longestWall, wall - lastWall);
    longestCpu = Math.max(longestCpu, cpu - lastCpu);
    [lastWall, lastCpu] = [wall, cpu];
  }, 2);
  const start = performance.now();
  const report = await read(state);
  clearInterval(timer);
  reportSection({
    mode: values.mode,
    services: Number(values.services),
    driftCheckMs: round(performance.now() - start),
    longestTurnWallMs: round(longestWall),
    longestTurnCpuMs: round(longestCpu),
    pieces: report.pieces.length,
    foreignRules: report.foreign.length,
  });
} finally {
  await lab.destroy();
}
