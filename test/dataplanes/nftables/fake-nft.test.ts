// The fake nft's transactions share what they leave alone with the ruleset they start from
// (fake-nft.ts, CopyOnWrite): that ruleset must stay as it was, whether the transaction applied
// or was refused, and a transaction must give the same state whenever it is applied to it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NftError } from '../../../dataplanes/nftables/nft-error.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { applyScript, dump } from './fake-nft.ts';
import { randomState } from './random-state.ts';

test('a transaction leaves the ruleset it starts from unchanged, applied or refused', () => {
  let state = randomState(prng(1));
  let ruleset = applyScript(emptyNftRuleset(), nftablesPlanner.render(nftablesPlanner.planFull(state)));
  // Fixed states: random ones change every kind of object (chains, rules, sets, maps, elements).
  for (let seed = 2; seed <= 30; seed++) {
    const next = randomState(prng(seed));
    const script = nftablesPlanner.render(nftablesPlanner.planIncremental(state, next));
    const before = dump(ruleset);
    const after = applyScript(ruleset, script);
    assert.deepEqual(dump(ruleset), before, `step to seed ${seed}: the ruleset it started from`);
    assert.deepEqual(dump(applyScript(ruleset, script)), dump(after), `step to seed ${seed}: applied again`);
    // Again on the state it made: its elements exist, so the kernel refuses it, and nothing changes.
    const made = dump(after);
    assert.throws(() => applyScript(after, script), NftError, `step to seed ${seed}: refused`);
    assert.deepEqual(dump(after), made, `step to seed ${seed}: unchanged by the refused transaction`);
    // Checking (nft -c) changes nothing either, whatever it answers.
    try {
      applyScript(after, script, true);
    } catch (error) {
      if (!(error instanceof NftError)) throw error;
    }
    assert.deepEqual(dump(after), made, `step to seed ${seed}: unchanged by a check`);
    [ruleset, state] = [after, next];
  }
});
