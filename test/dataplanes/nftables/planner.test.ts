// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/planner.test.ts --name 'random pairs'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COUNTED_UP_TO } from '../../../dataplanes/nftables/endpoint-dispatch.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { applyScript, dump, dumpUpToNumbering } from './fake-nft.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { randomState } from './random-state.ts';

const web = (endpoints: string[]) =>
  servicePort('web', { clusterIP: '10.96.0.10', clusterEndpoints: endpoints.map((ip) => endpoint(ip)) });

test('full sync replaces an existing table and also loads into an empty kernel', () => {
  const full = nftablesPlanner.planFull(ipv4([web(['10.244.1.10'])]));
  const script = nftablesPlanner.render(full);
  const once = applyScript(emptyNftRuleset(), script);
  assert.deepEqual(dump(applyScript(once, script)), dump(once));
});

test('an endpoint replaced in place is one element delete and one add, nothing else', () => {
  const tx = nftablesPlanner.planIncremental(ipv4([web(['10.244.1.10'])]), ipv4([web(['10.244.1.11'])]));
  assert.equal(
    nftablesPlanner.render(tx),
    'delete element ip kproxy backends-tcp { 10.96.0.10 . 80 . 0 }\n' +
      'add element ip kproxy backends-tcp { 10.96.0.10 . 80 . 0 : 10.244.1.11 . 8080 }\n',
  );
});

test('a count change within COUNTED_UP_TO replaces the count element and adds the endpoint: no chain, no verdict', () => {
  const script = nftablesPlanner.render(
    nftablesPlanner.planIncremental(
      ipv4([web(['10.244.1.10'])]),
      ipv4([web(['10.244.1.10', '10.244.1.11'])]),
    ),
  );
  assert.deepEqual(script.split('\n').filter(Boolean).sort(), [
    'add element ip kproxy backends-tcp { 10.96.0.10 . 80 . 1 : 10.244.1.11 . 8080 }',
    'add element ip kproxy backends-tcp-counts { 10.96.0.10 . 80 : 2 }',
    'delete element ip kproxy backends-tcp-counts { 10.96.0.10 . 80 }',
  ]);
});

test('a new count above COUNTED_UP_TO adds its chain first; the unused count chain is deleted after its elements', () => {
  const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.244.1.${i + 1}`);
  const over = COUNTED_UP_TO + 1;
  const script = nftablesPlanner.render(
    nftablesPlanner.planIncremental(ipv4([web(ips(over))]), ipv4([web(ips(over + 1))])),
  );
  const lines = script.split('\n');
  const at = (prefix: string) => lines.findIndex((l) => l.startsWith(prefix));
  assert.ok(at(`add chain ip kproxy backends-tcp-${over + 1}`) === 0, script);
  assert.ok(
    at('delete element ip kproxy cluster-endpoints') < at(`delete chain ip kproxy backends-tcp-${over}`),
    script,
  );
  assert.ok(
    at('add element ip kproxy cluster-endpoints') > at(`add rule ip kproxy backends-tcp-${over + 1}`),
    script,
  );
  // Down into the bound: the dispatch element goes to the counted chain, the count to its map.
  const down = nftablesPlanner.render(
    nftablesPlanner.planIncremental(ipv4([web(ips(over))]), ipv4([web(ips(COUNTED_UP_TO))])),
  );
  assert.match(down, /^add element ip kproxy cluster-endpoints \{ .* : goto backends-tcp-counted \}$/m);
  assert.match(
    down,
    new RegExp(
      `^add element ip kproxy backends-tcp-counts \\{ 10\\.96\\.0\\.10 \\. 80 : ${COUNTED_UP_TO} \\}$`,
      'm',
    ),
  );
  assert.match(down, new RegExp(`^delete chain ip kproxy backends-tcp-${over}$`, 'm'));
});

test('no change gives an empty transaction', () => {
  const state = ipv4([web(['10.244.1.10'])]);
  assert.equal(nftablesPlanner.render(nftablesPlanner.planIncremental(state, state)), '');
});

test('the same state renders the same bytes', () => {
  const seed = 7;
  const a = nftablesPlanner.render(nftablesPlanner.planFull(randomState(prng(seed))));
  const b = nftablesPlanner.render(nftablesPlanner.planFull(randomState(prng(seed))));
  assert.equal(a, b);
});

test('incremental ≡ full on the fake nft, for random pairs of states', () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('incremental ≡ full', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    for (let i = 0; i < 200; i++) {
      const a = randomState(random);
      const b = randomState(random);
      const kernelA = applyScript(emptyNftRuleset(), nftablesPlanner.render(nftablesPlanner.planFull(a)));
      const viaIncremental = applyScript(
        kernelA,
        nftablesPlanner.render(nftablesPlanner.planIncremental(a, b)),
      );
      const viaFull = applyScript(kernelA, nftablesPlanner.render(nftablesPlanner.planFull(b)));
      // The same endpoints behind every key; their indexes may differ (endpoint-slots.ts).
      assert.deepEqual(
        dumpUpToNumbering(viaIncremental),
        dumpUpToNumbering(viaFull),
        `pair ${i} of seed ${seed}`,
      );
    }
  }
});

test('ClientIP: a count change within its power-of-two bucket adds a two-rule count chain and keeps the checks', () => {
  const sticky = (n: number) =>
    servicePort('web', {
      clusterIP: '10.96.0.10',
      sessionAffinity: { timeoutSeconds: 60 },
      clusterEndpoints: Array.from({ length: n }, (_, i) => endpoint(`10.244.1.${10 + i}`)),
    });
  const chainLines = (from: number, to: number) =>
    nftablesPlanner
      .render(nftablesPlanner.planIncremental(ipv4([sticky(from)]), ipv4([sticky(to)])))
      .split('\n')
      .filter((l) => / chain | rule /.test(l))
      .map((l) => l.replace(/ \{ comment.*| (meta l4proto tcp )?tcp dport set numgen.*/, ''));
  // 10 -> 9: both in bucket 16, as a plain key's 10 -> 9 adds backends-tcp-9 and its one rule.
  assert.deepEqual(chainLines(10, 9), [
    'add chain ip kproxy affinity-backends-tcp-9',
    'add rule ip kproxy affinity-backends-tcp-9 jump affinity-backends-tcp-remembered-16',
    'add rule ip kproxy affinity-backends-tcp-9',
    'flush chain ip kproxy affinity-backends-tcp-10',
    'delete chain ip kproxy affinity-backends-tcp-10',
  ]);
  // 9 -> 8 leaves bucket 16 for bucket 8: its eight checks come, the sixteen go.
  const crossing = chainLines(9, 8);
  assert.equal(
    crossing.filter((l) => l.startsWith('add rule ip kproxy affinity-backends-tcp-remembered-8 ')).length,
    8,
  );
  assert.ok(
    crossing.includes('delete chain ip kproxy affinity-backends-tcp-remembered-16'),
    crossing.join('\n'),
  );
});
