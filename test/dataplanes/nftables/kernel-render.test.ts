// `render` on the kernel: what it prints loads with plain `nft -f` into an empty namespace and
// gives the ruleset the live full sync makes, cold start in pieces included; and a full sync on a
// node with our tables rewrites them in place, so dynamic sets (affinity) keep their elements.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/kernel-render.test.ts --name 'cold start in pieces included'
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { commandNftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { nftablesPlanner, planFull } from '../../../dataplanes/nftables/planner.ts';
import { execaRunner } from '../../../dataplanes/shared/command-runner.ts';
import { CANARY_SET } from '../../../dataplanes/shared/nft/ruleset.ts';
import { Lab } from '../../../harness/netns.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';
import { randomState } from './random-state.ts';

const isRoot = process.getuid?.() === 0;
const ROOT_REASON = 'needs root: network namespaces and nft';

function dataplaneIn(ns: string, coldStartChunk?: number): NftablesDataplane {
  const commands = execaRunner(['ip', 'netns', 'exec', ns]);
  return new NftablesDataplane({ nft: commandNftRunner(commands), commands, coldStartChunk });
}

type Json = Record<string, unknown>;

/** A value nft accepts for a set type component (enough for the types kproxy's sets use). */
const SAMPLE: Readonly<Record<string, string>> = {
  ipv4_addr: '10.9.9.9',
  ipv6_addr: 'fd00::9:9',
  inet_service: '80',
  inet_proto: 'tcp',
  mark: '1',
};

function sample(type: unknown): string {
  const parts = Array.isArray(type) ? type : [type];
  return parts.map((part) => SAMPLE[String(part)] ?? assert.fail(`no sample for ${part}`)).join(' . ');
}

describe('render on the kernel', { skip: isRoot ? false : ROOT_REASON }, () => {
  let lab: Lab;
  before(() => {
    lab = new Lab('nftrender');
  });
  after(() => lab?.destroy());

  test('render (full) loaded with nft -f gives the ruleset of the live full sync, cold start in pieces included', async () => {
    const seeds = testSeeds({ first: 3, count: 2 });
    process.stdout.write(seedsLine('nftables render ≡ live on the kernel', seeds));
    // Emptied for each seed: the live sync is a cold start, the load goes into an empty kernel.
    const live = await lab.addNetns('live');
    const loaded = await lab.addNetns('load');
    for (const seed of seeds) {
      for (const ns of [live, loaded]) await lab.exec(ns, 'nft', ['flush', 'ruleset']);
      // Odd seeds cold-start in pieces of 5 service ports, even ones in one transaction.
      const chunk = seed % 2 === 1 ? 5 : undefined;
      const state = randomState(prng(seed));
      const dp = dataplaneIn(live, chunk);
      await dp.start();
      await dp.sync(state, 'full');
      dp.close();
      await nftLoad(lab, loaded, nftablesPlanner.render(planFull(state, { coldStartChunk: chunk })));
      assert.deepEqual(
        await canonicalRuleset(lab, loaded),
        await canonicalRuleset(lab, live),
        `seed ${seed}`,
      );
      const canary = async (ns: string) =>
        (await lab.exec(ns, 'nft', ['list', 'set', 'ip', 'kproxy', CANARY_SET])).stdout;
      if (state.IPv4) assert.equal(await canary(loaded), await canary(live), `seed ${seed}: the same nonce`);
    }
  });

  test('a full sync on a node with our tables keeps what the packet path put in dynamic sets', async () => {
    const ns = await lab.addNetns('affinity');
    const state = ipv4([
      servicePort('web', {
        clusterIP: '10.96.0.10',
        clusterEndpoints: [endpoint('10.244.1.10'), endpoint('10.244.1.11')],
        sessionAffinity: { timeoutSeconds: 10800 },
      }),
    ]);
    const dp = dataplaneIn(ns);
    await dp.start();
    await dp.sync(state, 'full');
    // The dynamic sets, whatever they are called (nft -j shows flag timeout, not dynamic): an
    // element in each, as a packet would add.
    const listing = JSON.parse((await lab.exec(ns, 'nft', ['-j', 'list', 'sets', 'ip'])).stdout) as {
      nftables: { set?: Json; map?: Json }[];
    };
    const dynamic = listing.nftables
      .map((o) => o.set ?? o.map)
      .filter(
        (s): s is Json =>
          s?.table === 'kproxy' && (s.timeout !== undefined || /dynamic|timeout/.test(String(s.flags))),
      );
    assert.ok(dynamic.length > 0, 'the state has dynamic sets');
    for (const set of dynamic) {
      const value = set.map === undefined ? '' : ` : ${sample(set.map)}`;
      await lab.exec(ns, 'nft', [
        'add',
        'element',
        'ip',
        'kproxy',
        String(set.name),
        `{ ${sample(set.type)}${value} }`,
      ]);
    }
    assert.equal((await dp.sync(state, 'full')).kind, 'full');
    for (const set of dynamic) {
      const kind = set.map === undefined ? 'set' : 'map';
      const { stdout } = await lab.exec(ns, 'nft', ['list', kind, 'ip', 'kproxy', String(set.name)]);
      assert.match(stdout, /elements = /, `${set.name} kept its element`);
    }
    assert.equal(await dp.intact(), true);
  });
});
