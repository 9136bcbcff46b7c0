// How long kproxy takes a node over from kube-proxy (issue 29) at the bench's size: the node holds
// kube-proxy's rules for the cluster (kube-proxy-rulesets.ts: its iptables mode's nat restore, or
// its nftables table loaded in pieces of 1,000 services, the loading not timed), then the takeover
// as the README's steps run it: kproxy's start and first full sync (its rules beside kube-proxy's),
// then the removal of kube-proxy's leftovers (removeKubeProxyLeftovers, as `kproxy cleanup
// --kube-proxy`). One namespace per pair; kproxy's nftables mode writes by nft text here (the
// daemon's netlink element writer lives in the process' own namespace; the kube-proxy shape
// section times both).
//   node bench/kube-proxy-takeover.ts [--services 10000] [--endpoints 10]
//     [--pairs iptables:iptables,iptables:nftables,nftables:iptables,nftables:nftables]
//     [--pieces 1000] (kube-proxy's per-service chains per iptables-nft-restore when removing them)
// (kube-proxy's mode:kproxy's mode; each step's time is printed on stderr as it ends).
import { parseArgs } from 'node:util';
import { IptablesDataplane } from '../dataplanes/iptables/live.ts';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import {
  KUBE_PROXY_CHAINS_PER_RESTORE,
  removeKubeProxyLeftovers,
} from '../dataplanes/shared/kube-proxy-leftovers.ts';
import { Lab } from '../harness/netns.ts';
import { loadedModel } from './bench-model.ts';
import { kubeProxyIptablesRestore, kubeProxyNftChunks } from './kube-proxy-rulesets.ts';
import { reportSection, round, timeMs } from './measure.ts';
import { type ClusterShape, shapedCluster } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    pieces: { type: 'string', default: String(KUBE_PROXY_CHAINS_PER_RESTORE) },
    pairs: {
      type: 'string',
      default: 'iptables:iptables,iptables:nftables,nftables:iptables,nftables:nftables',
    },
  },
});
type Mode = 'iptables' | 'nftables';
const pairs = values.pairs.split(',').map((pair) => pair.split(':') as [Mode, Mode]);
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const shape: ClusterShape = { services, endpointsPerService: endpoints, wide: false };
/** Generous: one tool run over 10k services takes seconds; this bounds a hang. */
const TOOL_TIMEOUT_MS = 10 * 60_000;
const lines = (generated: Iterable<string>) => `${[...generated].join('\n')}\n`;

const lab = new Lab(`bench-kptake-${process.pid}`);
try {
  const state = loadedModel(shapedCluster(shape)).update().state;
  const figures: Record<string, number> = { services, endpoints, pieces: Number(values.pieces) };
  for (const [from, to] of pairs) {
    const ns = await lab.addNetns(`${from.slice(0, 3)}-${to.slice(0, 3)}`);
    const runner = execaRunner(['nsenter', `--net=/run/netns/${ns}`], { timeoutMs: () => TOOL_TIMEOUT_MS });
    const load = async (tool: string, args: string[], input: string) => {
      const result = await runner.run(tool, args, input);
      if (result.exitCode !== 0) throw new Error(`${tool}: ${result.stderr.slice(0, 2000)}`);
    };
    if (from === 'iptables') {
      await load('iptables-nft-restore', ['--wait'], lines(kubeProxyIptablesRestore(services, endpoints)));
    } else {
      for (const chunk of kubeProxyNftChunks(services, endpoints, 1000))
        await load('nft', ['-f', '-'], lines(chunk));
    }
    const dataplane =
      to === 'iptables'
        ? new IptablesDataplane({ runner, backend: 'nft' })
        : new NftablesDataplane({ nft: commandNftRunner(runner), commands: runner });
    const syncMs = await timeMs(async () => {
      await dataplane.start();
      await dataplane.sync(state, 'full');
    });
    await dataplane.settled?.();
    process.stderr.write(`kube-proxy ${from} -> kproxy ${to}: first sync ${round(syncMs, 0)} ms\n`);
    const removeMs = await timeMs(() =>
      removeKubeProxyLeftovers(runner, { nftChainsPerRestore: Number(values.pieces) }),
    );
    figures[`${from}To${to}SyncMs`] = round(syncMs, 0);
    figures[`${from}To${to}LeftoversMs`] = round(removeMs, 0);
    process.stderr.write(
      `kube-proxy ${from} -> kproxy ${to}: leftovers removed in ${round(removeMs, 0)} ms\n`,
    );
  }
  reportSection(figures);
} finally {
  await lab.destroy();
}
