// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/cold-start.test.ts --name 'every prefix'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { DualStackState, ProxyState } from '../../../contract/proxy-state.ts';
import { coldStartTransactions } from '../../../dataplanes/nftables/cold-start.ts';
import { desiredRuleset } from '../../../dataplanes/nftables/desired-ruleset.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import type { NftRunner } from '../../../dataplanes/nftables/nft-runner.ts';
import { fullTransaction } from '../../../dataplanes/shared/nft/full-transaction.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { testSeeds } from '../../support/seeds.ts';
import { applyScript, dump } from './fake-nft.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { randomState } from './random-state.ts';
import { RecordingCommandRunner, RecordingNftRunner } from './recording-nft-runner.ts';

/** The state with only the first `ipv4` and `ipv6` service ports of each family (in map order). */
function firstPorts(state: DualStackState, ipv4: number, ipv6: number): DualStackState {
  const first = (s: ProxyState | undefined, n: number) =>
    s && { ...s, servicePorts: new Map([...s.servicePorts].slice(0, n)) };
  return {
    ...(state.IPv4 && { IPv4: first(state.IPv4, ipv4) }),
    ...(state.IPv6 && { IPv6: first(state.IPv6, ipv6) }),
  };
}

/**
 * Applies the cold start of `state` in pieces of `maxElements` to the fake kernel: after every
 * piece the kernel must hold the full ruleset of the first service ports, and at the end all.
 */
function assertPiecesArePrefixes(state: DualStackState, maxElements: number, what: string): number {
  const full = (s: DualStackState) =>
    JSON.stringify(dump(applyScript(emptyNftRuleset(), fullTransaction(desiredRuleset(s)).toString())));
  const n4 = state.IPv4?.servicePorts.size ?? 0;
  const n6 = state.IPv6?.servicePorts.size ?? 0;
  // Pieces go family by family: IPv4's ports first, then IPv6's.
  const prefixes = [
    ...Array.from({ length: n4 + 1 }, (_, m) => full(firstPorts(state, m, 0))),
    ...Array.from({ length: n6 }, (_, m) => full(firstPorts(state, n4, m + 1))),
  ];
  let kernel = emptyNftRuleset();
  let reached = 0;
  const pieces = [...coldStartTransactions(state, maxElements)].filter((tx) => tx !== undefined);
  for (const [n, tx] of pieces.entries()) {
    kernel = applyScript(kernel, tx.toString());
    const at = prefixes.indexOf(JSON.stringify(dump(kernel)), reached);
    assert.ok(at >= reached, `${what}: after piece ${n} the kernel is no prefix of the service ports`);
    reached = at;
  }
  assert.equal(reached, prefixes.length - 1, `${what}: the pieces end in the whole ruleset`);
  return pieces.length;
}

test('every prefix of a cold start in pieces is the full ruleset of the first service ports; the last is the whole', () => {
  for (const seed of testSeeds({ first: 42 })) {
    const random = prng(seed);
    for (let i = 0; i < 30; i++) {
      const state = randomState(random);
      // One service port per piece (maxElements 1) puts every shared object in several pieces.
      const pieces = assertPiecesArePrefixes(state, i % 2 === 0 ? 1 : 7, `seed ${seed}, state ${i}`);
      const ports = (state.IPv4?.servicePorts.size ?? 0) + (state.IPv6?.servicePorts.size ?? 0);
      if (ports > 4) assert.ok(pieces > 2, `seed ${seed}, state ${i}: ${pieces} pieces`);
    }
  }
});

test("what ports share (a Service's cluster IP, a hairpin pair) is written once, whatever piece each is in", () => {
  // Ports claim no address another port holds (the model's address-claims.ts): only these are shared.
  const port = (number: number) =>
    servicePort('web', {
      clusterIP: '10.96.0.1',
      port: number,
      clusterEndpoints: [endpoint('10.244.1.1', 8080, { isLocal: true })],
    });
  assertPiecesArePrefixes(ipv4([port(80), port(81), port(82)]), 1, 'shared');
});

test('the live dataplane splits a large cold start and puts the canary in last', async () => {
  const nft = new RecordingNftRunner();
  const dp = new NftablesDataplane({ nft, commands: new RecordingCommandRunner(), coldStartChunk: 5 });
  await dp.start();
  const state = randomState(prng(3));
  await dp.sync(state, 'full');
  assert.ok(nft.scripts.length > 2, `${nft.scripts.length} transactions`);
  assert.ok(nft.scripts.slice(0, -1).every((s) => !/element ip6? kproxy canary/.test(s)));
  assert.match(nft.scripts.at(-1)!, / canary \{ \d+ \}/);
  assert.equal(await dp.intact(), true);
  // Our tables are there now: a later full sync rewrites them in place, in one transaction.
  const chain = (family: string) => ({
    nftables: [{ chain: { family, table: 'kproxy', name: 'services' } }],
  });
  nft.chains = { ip: chain('ip'), ip6: chain('ip6') };
  const before = nft.scripts.length;
  await dp.sync(state, 'full');
  assert.equal(nft.scripts.length, before + 1, 'later full syncs are one transaction');
  assert.doesNotMatch(nft.scripts.at(-1)!, /^delete table/m, 'in place');
  assert.match(nft.scripts.at(-1)!, /^flush set ip kproxy canary\n/m);
  assert.match(nft.scripts.at(-1)!, /^add element ip kproxy canary \{ 2 \}$/m, 'the second full sync');
  assert.equal(await dp.intact(), true);
});

test('a cold start piece that nft refuses ends the cold start: no later piece is written, none is left in flight', async () => {
  const events: string[] = [];
  const recording = new RecordingNftRunner();
  let pieces = 0;
  // Each piece takes a moment to write, so the next one is built meanwhile; the third is refused.
  const nft: NftRunner = {
    async run(script) {
      const n = pieces++;
      events.push(`start ${n}`);
      await delay(5);
      events.push(`end ${n}`);
      if (n === 2) throw new NftError('-f', 'Error: Could not process rule: No such file or directory');
      await recording.run(script);
    },
    listChainsJson: (family) => recording.listChainsJson(family),
    listSetJson: (family, name) => recording.listSetJson(family, name),
    check: (script) => recording.check(script),
  };
  const dp = new NftablesDataplane({ nft, commands: new RecordingCommandRunner(), coldStartChunk: 5 });
  await dp.start();
  await assert.rejects(dp.sync(randomState(prng(3)), 'full'), NftError);
  assert.deepEqual(events, ['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2']);
  assert.equal(await dp.intact(), false, 'a cold start cut short has no canary');
});
