import assert from 'node:assert/strict';
import { test } from 'node:test';
import { desiredRuleset } from '../../../dataplanes/nftables/desired-ruleset.ts';
import { coldStartTransactions, fullTransaction } from '../../../dataplanes/nftables/full-transaction.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { prng } from '../../support/prng.ts';
import { applyTransaction, dump, type FakeState } from './fake-nft.ts';
import { randomState } from './random-state.ts';
import { RecordingCommandRunner, RecordingNftRunner } from './recording-nft-runner.ts';

test('a cold start in bounded transactions ends in the full ruleset; services become reachable last', () => {
  const random = prng(42);
  for (let i = 0; i < 20; i++) {
    const desired = desiredRuleset(randomState(random));
    const chunks = coldStartTransactions(desired, 7);
    let kernel: FakeState = new Map();
    let reachableFrom = Number.POSITIVE_INFINITY;
    for (const [n, tx] of chunks.entries()) {
      kernel = applyTransaction(kernel, tx.ops);
      const elements = tx.ops.flatMap((op) => (op.object === 'element' ? [op] : []));
      assert.ok(elements.reduce((sum, op) => sum + op.elements.length, 0) <= 7, `chunk ${n} too big`);
      for (const op of elements) {
        const reachability = op.set === 'service-ips' || op.set === 'service-nodeports';
        if (reachability) reachableFrom = Math.min(reachableFrom, n);
        else assert.ok(n <= reachableFrom, `${op.set} filled after a service became reachable`);
      }
    }
    assert.deepEqual(dump(kernel), dump(applyTransaction(new Map(), fullTransaction(desired).ops)));
  }
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
  await dp.sync(state, 'full');
  assert.match(
    nft.scripts.at(-1)!,
    /^add table ip6? kproxy\ndelete table/,
    'later full syncs are one transaction',
  );
});
