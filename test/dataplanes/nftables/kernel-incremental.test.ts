// incremental ≡ full on the real kernel: full(A) then incremental(A→B) in one namespace gives
// exactly the ruleset of full(B) loaded in another.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { prng } from '../../support/prng.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';
import { randomState } from './random-state.ts';

test('kernel: full(A) + incremental(A→B) lists exactly like full(B), for random pairs', async (t) => {
  if (!requireRoot(t, 'nft in network namespaces')) return;
  const lab = new Lab('nftinc');
  t.after(() => lab.destroy());
  const viaIncremental = await lab.addNetns('inc');
  const viaFull = await lab.addNetns('full');
  const seed = Number(process.env.NFT_SEED ?? Date.now() % 100000);
  t.diagnostic(`seed ${seed} (NFT_SEED=${seed} to repeat)`);
  console.log(`kernel incremental ≡ full: seed ${seed}`);
  const random = prng(seed);
  for (let i = 0; i < 20; i++) {
    const a = randomState(random);
    const b = randomState(random);
    await nftLoad(lab, viaIncremental, nftablesPlanner.render(nftablesPlanner.planFull(a)));
    const step = nftablesPlanner.render(nftablesPlanner.planIncremental(a, b));
    await nftLoad(lab, viaIncremental, step);
    await nftLoad(lab, viaFull, nftablesPlanner.render(nftablesPlanner.planFull(b)));
    assert.deepEqual(
      await canonicalRuleset(lab, viaIncremental),
      await canonicalRuleset(lab, viaFull),
      `pair ${i} of seed ${seed}; incremental step was:\n${step}`,
    );
  }
});

test('kernel: every golden script loads into an empty namespace and reloads over itself', async (t) => {
  if (!requireRoot(t, 'nft in network namespaces')) return;
  const { goldenStates } = await import('./golden-states.ts');
  const lab = new Lab('nftload');
  t.after(() => lab.destroy());
  for (const [name, state] of Object.entries(goldenStates)) {
    const ns = await lab.addNetns(name);
    const script = nftablesPlanner.render(nftablesPlanner.planFull(state));
    await nftLoad(lab, ns, script);
    const first = await canonicalRuleset(lab, ns);
    await nftLoad(lab, ns, script);
    assert.deepEqual(await canonicalRuleset(lab, ns), first, name);
  }
});
