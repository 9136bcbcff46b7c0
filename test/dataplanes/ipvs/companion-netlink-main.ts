// The IPVS companion table's incremental transactions written the way the live dataplane writes
// them (writeTransaction: elements by netlink when the transaction splits), run INSIDE a namespace
// (the writer's socket is opened in this process's namespace): companion-kernel.test.ts starts it
// once a namespace and sends it requests (test/support/lab-requests.ts), each one of:
//   netlink SEED...     the full companion table of randomState(SEED1) by nft, then the
//                       incremental plans to the service ports of the rest (on the first's node)
//   text SEED...        the same, every transaction by nft
//   cold-netlink NAME   the full companion table of coldStartStates' NAME as a cold start writes
//                       it: its structure and hooks by nft, the elements between them by netlink,
//                       in datagrams of ~16 KiB
//   cold-text NAME      the same table in one transaction by nft
// Each answers with the batches the writer committed ({ batches }); netlink and text with how many
// of their incremental steps change something too ({ changes }: a state drawn alike changes nothing).

import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { COMPANION_TABLE, companionSets } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { ipvsIncremental, ipvsPlanner } from '../../../dataplanes/ipvs/planner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import {
  NetlinkElementWriter,
  writeElementsApart,
  writeTransaction,
} from '../../../dataplanes/shared/nft/netlink-elements.ts';
import { serveRequests } from '../../support/lab-requests.ts';
import { prng } from '../../support/prng.ts';
import { randomState } from '../nftables/random-state.ts';
import { coldStartStates } from './cold-start-states.ts';

const commands = execaRunner([]);
const nft = async (script: string) => {
  if (script === '') return;
  const result = await commands.run('nft', ['-f', '-'], script);
  if (result.exitCode !== 0) throw new Error(`nft -f: ${result.stderr}`);
};

async function coldStart(mode: 'cold-netlink' | 'cold-text', name: string): Promise<{ batches: number }> {
  const plan = ipvsPlanner.planFull(coldStartStates[name]!);
  if (plan.kind !== 'full') throw new Error('expected a full plan');
  if (mode === 'cold-text') {
    await nft(plan.nft.toString());
    return { batches: 0 };
  }
  // The kernel doubles the send buffer asked for: datagrams of ~16 KiB.
  const cold = NetlinkElementWriter.open(COMPANION_TABLE, companionSets, 8192);
  try {
    const { structure, elements, hooks } = plan.coldStart;
    await nft(structure.toString());
    if (!(await writeElementsApart(cold, elements))) throw new Error('the writer cannot write the elements');
    await nft(hooks.toString());
    return { batches: cold.batches };
  } finally {
    cold.close();
  }
}

async function incremental(
  mode: 'netlink' | 'text',
  seeds: readonly string[],
): Promise<{ batches: number; changes: number }> {
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
  const writer = mode === 'netlink' ? NetlinkElementWriter.open(COMPANION_TABLE, companionSets) : undefined;
  try {
    await nft(full.nft.toString());
    let changes = 0;
    for (let i = 1; i < states.length; i++) {
      const plan = ipvsIncremental(states[i - 1]!, states[i]!, { scheduler: 'rr' }).plan;
      if (!plan.nft.empty) changes++;
      await writeTransaction(plan.nft, writer, nft);
    }
    return { batches: writer?.batches ?? 0, changes };
  } finally {
    writer?.close();
  }
}

serveRequests(async ([mode, ...args]) => {
  if (mode === 'cold-netlink' || mode === 'cold-text') return coldStart(mode, args[0]!);
  if (mode === 'netlink' || mode === 'text') return incremental(mode, args);
  throw new Error(`unknown request ${mode}`);
});
