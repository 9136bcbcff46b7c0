// incremental ≡ full on the real kernel: full(A) then incremental(A→B) in one namespace gives
// exactly the ruleset of full(B) loaded in another, but for which index each endpoint holds (an
// incremental sync keeps an endpoint's slot, a full sync numbers in address order).
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/kernel-incremental.test.ts --name 'random pairs'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { endpoint, ipv4, servicePort } from '../../../harness/proxy-states.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { canonicalRuleset, nftLoad } from './kernel-support.ts';
import { randomState } from './random-state.ts';

test('kernel: full(A) + incremental(A→B) lists exactly like full(B), for random pairs', async (t) => {
  if (!requireRoot(t, 'nft in network namespaces')) return;
  const lab = new Lab('nftinc');
  t.after(() => lab.destroy());
  const viaIncremental = await lab.addNetns('inc');
  const viaFull = await lab.addNetns('full');
  const seeds = testSeeds();
  process.stdout.write(seedsLine('kernel incremental ≡ full', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    for (let i = 0; i < 20; i++) {
      const a = randomState(random);
      const b = randomState(random);
      await nftLoad(lab, viaIncremental, nftablesPlanner.render(nftablesPlanner.planFull(a)));
      const step = nftablesPlanner.render(nftablesPlanner.planIncremental(a, b));
      await nftLoad(lab, viaIncremental, step);
      await nftLoad(lab, viaFull, nftablesPlanner.render(nftablesPlanner.planFull(b)));
      assert.deepEqual(
        await canonicalRuleset(lab, viaIncremental, { upToNumbering: true }),
        await canonicalRuleset(lab, viaFull, { upToNumbering: true }),
        `pair ${i} of seed ${seed}; incremental step was:\n${step}`,
      );
    }
  }
});

// Random states put every endpoint on one port; a ClientIP key on several ports has its own maps
// and chains (affinity.ts), and a key moves between the two shapes.
test('kernel: a ClientIP key moving between one endpoint port and several, incremental ≡ full', async (t) => {
  if (!requireRoot(t, 'nft in network namespaces')) return;
  const lab = new Lab('nftincaff');
  t.after(() => lab.destroy());
  const viaIncremental = await lab.addNetns('inc');
  const viaFull = await lab.addNetns('full');
  const state = (ports: readonly number[]) =>
    ipv4([
      servicePort('sticky', {
        clusterIP: '10.96.0.5',
        nodePort: 30005,
        clusterEndpoints: ports.map((port, i) => endpoint(`10.244.0.${i + 1}`, port)),
        sessionAffinity: { timeoutSeconds: 60 },
      }),
    ]);
  const onePort = state([8080, 8080, 8080]);
  const several = state([8080, 8081, 8080]);
  const otherPort = state([9090, 9090]);
  for (const [a, b] of [
    [onePort, several],
    [several, onePort],
    [several, otherPort],
  ] as const) {
    await nftLoad(lab, viaIncremental, nftablesPlanner.render(nftablesPlanner.planFull(a)));
    const step = nftablesPlanner.render(nftablesPlanner.planIncremental(a, b));
    await nftLoad(lab, viaIncremental, step);
    await nftLoad(lab, viaFull, nftablesPlanner.render(nftablesPlanner.planFull(b)));
    assert.deepEqual(
      await canonicalRuleset(lab, viaIncremental, { upToNumbering: true }),
      await canonicalRuleset(lab, viaFull, { upToNumbering: true }),
      step,
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
