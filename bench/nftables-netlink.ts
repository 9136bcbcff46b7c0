// The nftables element writer (netlink batches) at N services x E endpoints, run INSIDE a throwaway
// network namespace (the netlink socket is opened in this process's namespace):
//   ip netns add x && nsenter --net=/run/netns/x node --expose-gc bench/nftables-netlink.ts
// Measures the bare `nft -f` load of kproxy's full ruleset (unless --skip-bare: nftables-speed.ts
// runs this in its own section and has measured it), then kproxy's cold start with the writer, and
// one endpoint change end to end (median), in that namespace.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { desiredRuleset } from '../dataplanes/nftables/desired-ruleset.ts';
import { NftablesDataplane } from '../dataplanes/nftables/live.ts';
import { NetlinkElementWriter } from '../dataplanes/nftables/netlink-elements.ts';
import { commandNftRunner } from '../dataplanes/nftables/nft-runner.ts';
import { execaRunner } from '../dataplanes/shared/command-runner.ts';
import { fullTransaction } from '../dataplanes/shared/nft/full-transaction.ts';
import { TABLE } from '../dataplanes/shared/nft/transaction.ts';
import type { DualStackState } from '../src/model/proxy-state.ts';
import { loadedModel } from './bench-model.ts';
import { median, reportSection, round, TimedNftRunner, timeMs } from './measure.ts';
import { type ClusterShape, changedSlice, shapedCluster } from './synthetic-cluster.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '30000' },
    endpoints: { type: 'string', default: '10' },
    changes: { type: 'string', default: '21' },
    'skip-bare': { type: 'boolean', default: false },
    /** SO_SNDBUF to ask for (default: as much as the kernel gives; 212992 is Debian's wmem_max). */
    'send-buffer': { type: 'string' },
  },
});
const shape: ClusterShape = {
  services: Number(values.services),
  endpointsPerService: Number(values.endpoints),
  wide: false,
};
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
    sendBuffer === undefined ? undefined : Number(sendBuffer),
  );
  const nft = new TimedNftRunner(commandNftRunner(runner));
  const dataplane = new NftablesDataplane({ nft, commands: runner, elements });
  const coldStartMs = await timeMs(async () => {
    await dataplane.start();
    await dataplane.sync(state, 'full');
  });
  const coldStartNftMs = nft.ms;
  await dataplane.settled();
  const changeMs: number[] = [];
  const changeToolCalls: number[] = [];
  for (let run = 0; run < Number(values.changes); run++) {
    changeMs.push(
      await timeMs(async () => {
        nft.reset();
        model.setEndpointSlice(changedSlice(shape, run + 1));
        const update = model.update();
        state = update.state;
        const outcome = await dataplane.sync(update.state, 'incremental', update.changed);
        if (outcome.kind !== 'incremental') throw new Error('the endpoint change fell back to a full sync');
      }),
    );
    changeToolCalls.push(nft.calls);
  }
  elements.close();
  reportSection({
    services: shape.services,
    endpointsPerService: shape.endpointsPerService,
    batchBytes: elements.maxBytes,
    batches: elements.batches,
    ...(bareMs === undefined
      ? {}
      : { bareLoadMs: round(bareMs), coldStartRatio: round(coldStartMs / bareMs, 2) }),
    coldStartMs: round(coldStartMs),
    coldStartNftMs: round(coldStartNftMs),
    endpointChangeMedianMs: round(median(changeMs), 3),
    endpointChangeMinMs: round(Math.min(...changeMs), 3),
    endpointChangeMaxMs: round(Math.max(...changeMs), 3),
    endpointChangeNftCalls: median(changeToolCalls),
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
