// kube-proxy's shape section: upstream kube-proxy's rulesets for the bench cluster
// (kube-proxy-rulesets.ts) loaded by the stock tools, each into a fresh namespace, so that every
// "× faster than kube-proxy" is a ratio from one run:
// - nftables: its full sync as ONE `nft -f` transaction, and the same rules as one transaction
//   for the base objects plus one per 1,000 services (what a chunking kube-proxy could do);
//   beside them kproxy's cold start (NftablesDataplane start + full sync) of the same cluster as
//   the daemon runs it, elements by netlink (bench/nftables-netlink-child.ts, the nftables
//   section's child), and for information the same by nft text (the writer's fallback) here;
// - iptables-nft: one flushing restore of its nat table, then --noflush restores of one changed
//   service (its KUBE-SVC and KUBE-SEP chains, the stale KUBE-SEP deleted), alone and as
//   kube-proxy's partial sync sends it (also KUBE-SERVICES and the other top-level chains in full);
//   the report puts them beside the iptables section's kproxy figures when its size is the same.
// Size: kube-proxy's one nftables transaction grows ~quadratically (kernel baseline: 1.2 s at 1k,
// 157 s at 10k, 20+ min extrapolated at 30k), so the default is 10,000 services (the iptables
// section's), not the nftables section's 30,000: about 4–6 minutes in all on a 2-core machine.
//   node bench/kube-proxy-shape.ts [--services 10000] [--endpoints 10] [--chunk 1000]
//     [--partial-runs 4]
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import { Lab } from '../harness/netns.ts';
import { loadedModel } from './bench-model.ts';
import {
  kubeProxyIptablesPartial,
  kubeProxyIptablesRestore,
  kubeProxyNftChunks,
  kubeProxyNftRuleset,
} from './kube-proxy-rulesets.ts';
import { median, reportSection, round, timeMs } from './measure.ts';
import { nftablesNetlinkFigures } from './nftables-netlink-child.ts';
import { type ClusterShape, shapedCluster } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    chunk: { type: 'string', default: '1000' },
    'partial-runs': { type: 'string', default: '4' },
  },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const shape: ClusterShape = { services, endpointsPerService: endpoints, wide: false };
const CHUNK = Number(values.chunk);
const RESTORE = 'iptables-nft-restore';

/** Writes lines to a file as they are generated (the nft ruleset is 44 MB at 10,000 × 10). */
async function writeLines(file: string, lines: Iterable<string>): Promise<string> {
  const out = createWriteStream(file);
  for (const line of lines) if (!out.write(`${line}\n`)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
  return file;
}

/**
 * kube-proxy's one nftables transaction is ~quadratic (89–157 s at 10k here, more than the daemon's
 * 120 s bound for nft on a quiet run): the bench times it to its end.
 */
const TOOL_TIMEOUT_MS = 30 * 60_000;

const lines = (generated: Iterable<string>) => `${[...generated].join('\n')}\n`;

/**
 * Tools run inside a namespace the way the daemon runs them from inside it (nsenter, no mount ns).
 * iptables-restore reads its input on stdin, as the iptables section's: its --wait would take a
 * file name after it for its optional argument.
 */
async function runIn(ns: string, tool: string, args: readonly string[], input?: string): Promise<void> {
  const runner = execaRunner(['nsenter', `--net=/run/netns/${ns}`], { timeoutMs: () => TOOL_TIMEOUT_MS });
  const result = await runner.run(tool, args, input);
  if (result.exitCode !== 0) throw new Error(`${tool} ${args.join(' ')}: ${result.stderr.slice(0, 2000)}`);
}

const lab = new Lab(`bench-kpshape-${process.pid}`);
const dir = mkdtempSync(join(tmpdir(), 'kproxy-bench-kpshape-'));
try {
  // kproxy first: the daemon's path in a child (its own model), then the nft-text path in this
  // process, before it holds anything else.
  const netlink = await nftablesNetlinkFigures(await lab.addNetns('kproxy-netlink'), shape, 0);
  const model = loadedModel(shapedCluster(shape));
  const state = model.update().state;
  const kproxyNs = await lab.addNetns('kproxy-text');
  const runner = execaRunner(['nsenter', `--net=/run/netns/${kproxyNs}`]);
  const dataplane = new NftablesDataplane({ nft: commandNftRunner(runner), commands: runner });
  const kproxyNftTextColdStartMs = await timeMs(async () => {
    await dataplane.start();
    await dataplane.sync(state, 'full');
  });
  await dataplane.settled();

  const nftFile = await writeLines(join(dir, 'kube-proxy.nft'), kubeProxyNftRuleset(services, endpoints));
  const chunkFiles: string[] = [];
  for (const chunk of kubeProxyNftChunks(services, endpoints, CHUNK)) {
    chunkFiles.push(await writeLines(join(dir, `chunk-${chunkFiles.length}.nft`), chunk));
  }

  const chunkedNs = await lab.addNetns('nft-chunks');
  const nftChunkedMs = await timeMs(async () => {
    for (const file of chunkFiles) await runIn(chunkedNs, 'nft', ['-f', file]);
  });
  const oneNs = await lab.addNetns('nft-one');
  const nftOneTransactionMs = await timeMs(() => runIn(oneNs, 'nft', ['-f', nftFile]));

  const iptNs = await lab.addNetns('ipt');
  const iptInput = lines(kubeProxyIptablesRestore(services, endpoints));
  const iptFullRestoreMs = await timeMs(() => runIn(iptNs, RESTORE, ['--wait'], iptInput));
  // What was timed loaded: KUBE-SERVICES holds a rule per service and the node-ports one.
  const listed = await lab.exec(iptNs, 'iptables-nft', ['-w', '-t', 'nat', '-S', 'KUBE-SERVICES']);
  const serviceRules = listed.stdout.split('\n').filter((l) => l.startsWith('-A KUBE-SERVICES ')).length;
  if (serviceRules !== services + 1)
    throw new Error(`the iptables-nft restore loaded ${serviceRules} KUBE-SERVICES rules`);
  // The middle service's first endpoint moves and back (each run a real change), both restore
  // shapes alternating so that load from elsewhere hits both alike.
  const changed = Math.floor(services / 2);
  const serviceOnlyMs: number[] = [];
  const kubeProxyPartialMs: number[] = [];
  for (let run = 0; run < Number(values['partial-runs']); run++) {
    for (const topLevel of [false, true]) {
      const step = 2 * run + (topLevel ? 1 : 0);
      const change = { service: changed, from: step % 2, to: (step + 1) % 2 };
      const input = lines(kubeProxyIptablesPartial(services, endpoints, change, topLevel));
      const ms = await timeMs(() => runIn(iptNs, RESTORE, ['--noflush', '--wait'], input));
      (topLevel ? kubeProxyPartialMs : serviceOnlyMs).push(ms);
    }
  }

  reportSection({
    services,
    endpointsPerService: endpoints,
    chunkServices: CHUNK,
    nftTransactions: chunkFiles.length,
    kproxyNetlinkColdStartMs: netlink.coldStartMs,
    // Which path the daemon's elements took: all netlink unless a batch exceeded one datagram.
    kproxyNetlinkColdStartElements: netlink.coldStartNetlinkElements,
    kproxyNetlinkColdStartNftElements: netlink.coldStartNftElements,
    kproxyNftTextColdStartMs: round(kproxyNftTextColdStartMs),
    nftOneTransactionMs: round(nftOneTransactionMs),
    nftChunkedMs: round(nftChunkedMs),
    iptFullRestoreMs: round(iptFullRestoreMs),
    iptServiceChainsRestoreMs: round(median(serviceOnlyMs), 2),
    iptPartialSyncRestoreMs: round(median(kubeProxyPartialMs), 2),
    partialRuns: serviceOnlyMs.length,
  });
} finally {
  await lab.destroy();
  rmSync(dir, { recursive: true, force: true });
}
