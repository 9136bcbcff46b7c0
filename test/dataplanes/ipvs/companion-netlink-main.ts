// The IPVS companion table's incremental transactions written the way the live dataplane writes
// them (writeTransaction: elements by netlink when the transaction splits), run INSIDE a namespace
// (the writer's socket is opened in this process's namespace): companion-kernel.test.ts starts it.
// Usage:
//   node companion-netlink-main.ts netlink SEED...  the full companion table of randomState(SEED1)
//                                                   by nft, then the incremental plans to the
//                                                   service ports of the rest (on the first's node)
//   node companion-netlink-main.ts text SEED...     the same, every transaction by nft
//   node companion-netlink-main.ts cold-netlink NAME  the full companion table of coldStartStates'
//                                                   NAME as a cold start writes it: its structure
//                                                   and hooks by nft, the elements between them by
//                                                   netlink, in datagrams of ~16 KiB
//   node companion-netlink-main.ts cold-text NAME     the same table in one transaction by nft
// Prints one JSON line: the batches the writer committed.

import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { COMPANION_TABLE, companionSets } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { ipvsIncremental, ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import {
  NetlinkElementWriter,
  writeElementsApart,
  writeTransaction,
} from '../../../dataplanes/shared/nft/netlink-elements.ts';
import { prng } from '../../support/prng.ts';
import { randomState } from '../nftables/random-state.ts';
import { coldStartStates } from './cold-start-states.ts';

const [mode, ...seeds] = process.argv.slice(2);
const commands = execaRunner([]);
const nft = async (script: string) => {
  if (script === '') return;
  const result = await commands.run('nft', ['-f', '-'], script);
  if (result.exitCode !== 0) throw new Error(`nft -f: ${result.stderr}`);
};
if (mode === 'cold-netlink' || mode === 'cold-text') {
  const plan = ipvsPlanner.planFull(coldStartStates[seeds[0]!]!);
  if (plan.kind !== 'full') throw new Error('expected a full plan');
  // The kernel doubles the send buffer asked for: datagrams of ~16 KiB.
  const cold =
    mode === 'cold-netlink' ? NetlinkElementWriter.open(COMPANION_TABLE, companionSets, 8192) : undefined;
  if (cold) {
    const { structure, elements, hooks } = plan.coldStart;
    await nft(structure.toString());
    if (!(await writeElementsApart(cold, elements))) throw new Error('the writer cannot write the elements');
    await nft(hooks.toString());
  } else await nft(plan.nft.toString());
  process.stdout.write(`${JSON.stringify({ batches: cold?.batches ?? 0 })}\n`);
  cold?.close();
  process.exit(0);
}

const writer = mode === 'netlink' ? NetlinkElementWriter.open(COMPANION_TABLE, companionSets) : undefined;

const drawn = seeds.map((seed) => randomState(prng(Number(seed))));
const first = drawn[0]!;
// Service changes only: the node settings of the first (a change of them diffs whole chains).
const onFirstNode = (state: DualStackState): DualStackState => {
  const on = (family: 'IPv4' | 'IPv6'): ProxyState | undefined => {
    const base = first[family];
    return base && { ...base, servicePorts: state[family]?.servicePorts ?? base.servicePorts };
  };
  return { IPv4: on('IPv4'), IPv6: on('IPv6') };
};
const states = drawn.map(onFirstNode);
const full = ipvsPlanner.planFull(states[0]!);
if (full.kind !== 'full') throw new Error('expected a full plan');
await nft(full.nft.toString());
for (let i = 1; i < states.length; i++) {
  const plan = ipvsIncremental(states[i - 1]!, states[i]!, { scheduler: 'rr' }).plan;
  await writeTransaction(plan.nft, writer, nft);
}
process.stdout.write(`${JSON.stringify({ batches: writer?.batches ?? 0 })}\n`);
writer?.close();
