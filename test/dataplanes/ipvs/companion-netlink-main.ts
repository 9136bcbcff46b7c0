// The IPVS companion table's incremental transactions written the way the live dataplane writes
// them (writeTransaction: elements by netlink when the transaction splits), run INSIDE a namespace
// (the writer's socket is opened in this process's namespace): companion-kernel.test.ts starts it.
// Usage:
//   node companion-netlink-main.ts netlink SEED...  the full companion table of randomState(SEED1)
//                                                   by nft, then the incremental plans to the
//                                                   service ports of the rest (on the first's node)
//   node companion-netlink-main.ts text SEED...     the same, every transaction by nft
// Prints one JSON line: the batches the writer committed.

import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { COMPANION_TABLE, companionSets } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { ipvsIncremental, ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { NetlinkElementWriter, writeTransaction } from '../../../dataplanes/shared/nft/netlink-elements.ts';
import { prng } from '../../support/prng.ts';
import { randomState } from '../nftables/random-state.ts';

const [mode, ...seeds] = process.argv.slice(2);
const commands = execaRunner([]);
const nft = async (script: string) => {
  if (script === '') return;
  const result = await commands.run('nft', ['-f', '-'], script);
  if (result.exitCode !== 0) throw new Error(`nft -f: ${result.stderr}`);
};
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
