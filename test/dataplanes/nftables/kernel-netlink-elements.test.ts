// The netlink element writer on the kernel: a live dataplane that writes its elements as
// nf_tables batches leaves the same ruleset (`nft -j list ruleset`, normalised) as `nft -f` of the
// rendered plan, for every kind of set and map kproxy fills (ip and ip6, concatenated keys, numgen
// indexes, verdict maps, dnat maps with concatenated data, the concatenated interval set of
// source ranges, element comments), through cold starts in pieces and incremental syncs; and a
// batch the kernel refuses is refused whole, its error naming the element. The dataplane as the
// daemon makes it cuts a cold start into the pieces render --chunks prints.
// Sweep the random states (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/kernel-netlink-elements.test.ts --name 'random states'
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { COLD_START_CHUNK } from '../../../dataplanes/nftables/cold-start-chunk.ts';
import { ELEMENT_BYTES_BOUND } from '../../../dataplanes/nftables/live.ts';
import { nftablesPlanner, planFull } from '../../../dataplanes/nftables/planner.ts';
import { Lab } from '../../../harness/netns.ts';
import { LabRequests } from '../../support/lab-requests.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { goldenStates } from './golden-states.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';

const isRoot = process.getuid?.() === 0;
const MAIN = fileURLToPath(new URL('./netlink-sync-main.ts', import.meta.url));

describe('netlink element writer on the kernel', {
  skip: isRoot ? false : 'needs root: namespaces and nft',
}, () => {
  let lab: Lab;
  let requests: LabRequests;
  before(() => {
    lab = new Lab('nftnl');
    requests = new LabRequests(lab, MAIN);
  });
  after(() => lab?.destroy());

  /** What netlink-sync-main.ts inside `ns` answers (one process a namespace, for all its requests). */
  const inside = (ns: string, args: string[]) => requests.request(ns, args);

  test('golden states: netlink-written and nft-written rulesets are equal', async () => {
    for (const name of Object.keys(goldenStates)) {
      const written = await lab.addNetns(`w-${name.slice(0, 8)}`);
      const loaded = await lab.addNetns(`l-${name.slice(0, 8)}`);
      const { kinds, batches } = await inside(written, ['golden', name]);
      assert.deepEqual(kinds, ['full']);
      // The structure goes to nft; every piece after it is a batch.
      assert.ok((batches as number[])[0]! >= 2, `${name}: ${batches} batches`);
      await nftLoad(lab, loaded, nftablesPlanner.render(planFull(goldenStates[name]!)));
      assert.deepEqual(await canonicalRuleset(lab, written), await canonicalRuleset(lab, loaded), name);
    }
  });

  test('random states: a cold start in pieces, then incremental syncs, equal the same syncs by nft', async () => {
    // Seed s: the states of seeds s..s+4, the first's cold start then four incremental syncs.
    const seeds = testSeeds({ first: 11 });
    process.stdout.write(seedsLine('netlink element writer, random states', seeds));
    const written = await lab.addNetns('w-random');
    const loaded = await lab.addNetns('l-random');
    for (const seed of seeds) {
      const states = Array.from({ length: 5 }, (_, i) => String(seed + i));
      // Emptied first: a sweep's seeds share the namespaces (and each one's writing process).
      for (const ns of [written, loaded]) await lab.exec(ns, 'nft', ['flush', 'ruleset']);
      const { kinds, batches, changes } = await inside(written, ['sync', ...states]);
      assert.deepEqual(
        kinds,
        ['full', 'incremental', 'incremental', 'incremental', 'incremental'],
        `seed ${seed}`,
      );
      // Each incremental sync wrote its elements as one batch; one that changes nothing writes none
      // (seed 4: on 4's node, the state of 8 renders nothing after that of 7).
      const counts = batches as number[];
      assert.deepEqual(
        counts.slice(1).map((n, i) => n - counts[i]!),
        (changes as boolean[]).map((changed) => (changed ? 1 : 0)),
        `seed ${seed}: ${counts}`,
      );
      // The same plans (endpoint slots included) by nft alone.
      assert.deepEqual(
        (await inside(loaded, ['sync-text', ...states])).batches,
        [0, 0, 0, 0, 0],
        `seed ${seed}`,
      );
      assert.deepEqual(
        await canonicalRuleset(lab, written),
        await canonicalRuleset(lab, loaded),
        `seed ${seed}`,
      );
    }
  });

  test('a batch over one datagram goes to nft whole; the next small one is a batch again', async () => {
    const written = await lab.addNetns('w-oversize');
    const loaded = await lab.addNetns('l-oversize');
    const { kinds, batches, maxBytes } = (await inside(written, ['oversize'])) as {
      kinds: string[];
      batches: number[];
      maxBytes: number;
    };
    assert.deepEqual(kinds, ['full', 'incremental', 'incremental']);
    // The kernel's smallest send buffer: 200 endpoints' elements cannot fit (~50 bytes each).
    assert.ok(maxBytes < 200 * 50, `maxBytes ${maxBytes}`);
    const [cold, wide, next] = batches as [number, number, number];
    assert.ok(cold >= 2, `cold start: ${cold} batches`);
    assert.equal(wide, cold, 'the 200-endpoint change wrote no batch');
    assert.equal(next, wide + 1, 'one more endpoint: one batch');
    // Whichever way each sync went, the kernel holds what nft alone makes of the same syncs.
    await inside(loaded, ['oversize', 'text']);
    assert.deepEqual(await canonicalRuleset(lab, written), await canonicalRuleset(lab, loaded));
  });

  test("the daemon's cold start is cut where render --chunks cuts it, or finer where its send buffer is small", async () => {
    // The send buffer the daemon asks for, then Debian's default net.core.wmem_max (208 KiB).
    for (const sendBuffer of [[], ['212992']]) {
      const written = await lab.addNetns(`w-daemon${sendBuffer.length}`);
      const loaded = await lab.addNetns(`l-daemon${sendBuffer.length}`);
      const { kinds, batches, rendered, maxBytes } = (await inside(written, [
        'daemon-cold-start',
        ...sendBuffer,
      ])) as { kinds: string[]; batches: number; rendered: string[]; maxBytes: number };
      assert.deepEqual(kinds, ['full']);
      // The tables' structure goes to nft; each piece of elements after it, the canary last, is a batch.
      assert.ok(rendered.length >= 4, `${rendered.length} transactions: a cold start of 12,100 elements`);
      if (maxBytes >= COLD_START_CHUNK * ELEMENT_BYTES_BOUND) assert.equal(batches, rendered.length - 1);
      // A send buffer too small for a piece of COLD_START_CHUNK (net.core.wmem_max under 469 KiB):
      // run cuts smaller pieces than render prints, as the docs say.
      else assert.ok(batches > rendered.length - 1, `${batches} batches, maxBytes ${maxBytes}`);
      for (const input of rendered) await nftLoad(lab, loaded, input);
      assert.deepEqual(await canonicalRuleset(lab, written), await canonicalRuleset(lab, loaded));
    }
  });

  test('a refused batch changes nothing and names the clashing element', async () => {
    const ns = await lab.addNetns('refuse');
    await inside(ns, ['golden', 'cluster-ip']);
    const before = await canonicalRuleset(lab, ns);
    const { error } = (await inside(ns, ['refuse'])) as { error?: { name: string; message: string } };
    assert.equal(error?.name, 'ElementBatchError');
    assert.match(
      error.message,
      /add element ip service-ips \{ 10\.96\.0\.10 \. tcp \. 80 : goto external \}: EEXIST/,
    );
    assert.doesNotMatch(error.message, /10\.99\.0\.[12]/);
    assert.deepEqual(await canonicalRuleset(lab, ns), before);
  });
});
