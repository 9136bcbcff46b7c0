// The live nftables dataplane with the netlink element writer, run INSIDE a namespace (the writer's
// socket is opened in this process's namespace): kernel-netlink-elements.test.ts starts it once a
// namespace and sends it requests (test/support/lab-requests.ts), each one of:
//   sync SEED...         full sync (cold start in pieces of 2 elements) of randomState(SEED1), then
//                        incremental syncs to the service ports of the rest (on the first's node)
//   sync-text SEED...    the same syncs, every transaction by nft
//                        (both answer, per incremental sync, whether it changes anything)
//   golden NAME          full sync of a golden state, in pieces of 2 elements
//   refuse               a batch the kernel refuses; answers its error
//   daemon-cold-start [SNDBUF]  the dataplane as the daemon makes it (its own piece size; the send
//                        buffer it asks for, or SNDBUF): a cold start of 1,100 services x 10
//                        endpoints; answers its batches and render --chunks' transactions of the
//                        same state
//   oversize [text]      with the smallest send buffer the kernel gives: golden 'cluster-ip', then
//                        'web' with 200 endpoints (a batch over one datagram), then with 201
// Each request has a dataplane and a writer (socket) of its own, as a process of its own had.

import type { ChildProcess } from 'node:child_process';
import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { familySets } from '../../../dataplanes/nftables/base-objects.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { type CommandRunner, execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { elementBatch } from '../../../dataplanes/shared/nft/element-batch.ts';
import { NetlinkElementWriter } from '../../../dataplanes/shared/nft/netlink-elements.ts';
import { NftTransaction, TABLE } from '../../../dataplanes/shared/nft/transaction.ts';
import { serveRequests } from '../../support/lab-requests.ts';
import { prng } from '../../support/prng.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { goldenStates } from './golden-states.ts';
import { randomState } from './random-state.ts';

/**
 * The service ports of each state on the first one's node and families: incremental syncs that
 * change services only (fragments, whose elements go by netlink), not node settings (a diff that
 * rewrites chains goes to nft whole).
 */
function sameNode(states: DualStackState[]): DualStackState[] {
  const [first] = states;
  const on = (family: 'IPv4' | 'IPv6', drawn: DualStackState): ProxyState | undefined => {
    const base = first![family];
    return base && { ...base, servicePorts: drawn[family]?.servicePorts ?? base.servicePorts };
  };
  return states.map((drawn) => ({ IPv4: on('IPv4', drawn), IPv6: on('IPv6', drawn) }));
}

/** 'cluster-ip' with `count` endpoints behind 'web': ~50 bytes of batch each. */
function wideWeb(count: number): DualStackState {
  const pods = Array.from({ length: count }, (_, i) => endpoint(`10.244.${2 + (i >> 8)}.${i & 255}`));
  return ipv4([servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: pods })], {
    serviceCIDRs: ['10.96.0.0/16'],
  });
}

const processRunner = execaRunner([]);

/** One request (the modes above): what it answers. */
async function handle(mode: string | undefined, args: readonly string[]): Promise<Record<string, unknown>> {
  // SO_SNDBUF of 1 gives the kernel's minimum (~4.5 KiB), so a change of a few hundred elements
  // exceeds one datagram and must go to nft whole.
  const sendBuffer =
    mode === 'oversize' ? 1 : mode === 'daemon-cold-start' && args[0] ? Number(args[0]) : undefined;
  const elements = NetlinkElementWriter.open(TABLE, familySets, sendBuffer);
  // The request's `nft -i` sessions end with it, as they did with a process a request.
  const sessions: ChildProcess[] = [];
  const commands: CommandRunner = {
    ...processRunner,
    spawn(command, args) {
      const child = processRunner.spawn!(command, args);
      sessions.push(child);
      return child;
    },
  };
  try {
    return await answer(mode, args, elements, commands);
  } finally {
    elements.close();
    for (const session of sessions) session.kill();
  }
}

async function answer(
  mode: string | undefined,
  args: readonly string[],
  elements: NetlinkElementWriter,
  commands: CommandRunner,
): Promise<Record<string, unknown>> {
  const kinds: string[] = [];
  if (mode === 'sync' || mode === 'sync-text' || mode === 'golden' || mode === 'oversize') {
    const dataplane = new NftablesDataplane({
      nft: commandNftRunner(commands),
      commands,
      elements: mode === 'sync-text' || args[0] === 'text' ? undefined : elements,
      coldStartChunk: 2,
    });
    const states =
      mode === 'golden'
        ? [goldenStates[args[0]!]!]
        : mode === 'oversize'
          ? [goldenStates['cluster-ip']!, wideWeb(200), wideWeb(201)]
          : sameNode(args.map((seed) => randomState(prng(Number(seed)))));
    await dataplane.start();
    const batches: number[] = [];
    for (const [i, state] of states.entries()) {
      kinds.push((await dataplane.sync(state, i === 0 ? 'full' : 'incremental')).kind);
      batches.push(elements.batches);
    }
    // Per sync after the first: whether render --since prints anything for it (a state drawn equal
    // to the one before changes nothing, so nothing is written).
    const changes = states
      .slice(1)
      .map((state, i) => nftablesPlanner.render(nftablesPlanner.planIncremental(states[i]!, state)) !== '');
    return { kinds, batches, changes, maxBytes: elements.maxBytes };
  }
  if (mode === 'daemon-cold-start') {
    const pods = (i: number) =>
      Array.from({ length: 10 }, (_, j) => endpoint(`10.${100 + (i >> 8)}.${i & 255}.${j}`));
    const ports = Array.from({ length: 1_100 }, (_, i) =>
      servicePort(`s${i}`, { clusterIP: `10.96.${i >> 8}.${i & 255}`, clusterEndpoints: pods(i) }),
    );
    const state = ipv4(ports, { serviceCIDRs: ['10.96.0.0/16'] });
    const daemonLike = new NftablesDataplane({ nft: commandNftRunner(commands), commands, elements });
    await daemonLike.start();
    kinds.push((await daemonLike.sync(state, 'full')).kind);
    const rendered = nftablesPlanner.chunkInputs!(nftablesPlanner.planFull(state));
    return {
      kinds,
      batches: elements.batches,
      rendered: rendered.map((tx) => tx.input),
      maxBytes: elements.maxBytes,
    };
  }
  if (mode === 'refuse') {
    // Two adds, the second clashing with an element already there (another value): the batch is
    // refused whole, so the first is not added either.
    const tx = new NftTransaction();
    tx.addElements('ip', 'cluster-ips', [{ key: '10.99.0.1' }]);
    tx.addElements('ip', 'service-ips', [
      { key: '10.99.0.2 . tcp . 80', value: 'goto cluster-ip' },
      { key: '10.96.0.10 . tcp . 80', value: 'goto external' },
    ]);
    const split = elements.split(tx);
    if (!split) throw new Error('the refused batch should be one batch');
    const error = await elements.write(split, elementBatch(TABLE, split.ops)).then(
      () => undefined,
      (e: Error) => ({ name: e.name, message: e.message }),
    );
    return { error };
  }
  throw new Error(`unknown request ${mode}`);
}

serveRequests(([mode, ...args]) => handle(mode, args));
