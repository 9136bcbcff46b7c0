// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/fragment-index.test.ts --name 'random sequences'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changedServicePorts } from '../../../contract/changed-service-ports.ts';
import type { ProxyState } from '../../../contract/proxy-state.ts';
import { COUNTED_UP_TO } from '../../../dataplanes/nftables/endpoint-dispatch.ts';
import { FragmentIndex } from '../../../dataplanes/nftables/fragment-index.ts';
import { nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import { diffFamily } from '../../../dataplanes/shared/nft/diff.ts';
import { NftTransaction } from '../../../dataplanes/shared/nft/transaction.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { applyScript, dump } from './fake-nft.ts';
import { endpoint, proxyState, servicePort } from './fixtures.ts';
import { randomState } from './random-state.ts';

function fragmentStep(index: FragmentIndex, a: ProxyState, b: ProxyState): NftTransaction | undefined {
  const changed = [...changedServicePorts(a, b)];
  const plan = index.plan(
    changed.flatMap((k) => a.servicePorts.get(k) ?? []),
    changed.flatMap((k) => b.servicePorts.get(k) ?? []),
  );
  if (!plan) return undefined;
  const tx = new NftTransaction();
  diffFamily(tx, plan.before, plan.after);
  plan.commit();
  return tx;
}

test('fragments of the changed service ports take full(A) to exactly full(B), over random sequences', async () => {
  const seeds = testSeeds();
  process.stdout.write(seedsLine('fragment index', seeds));
  for (const seed of seeds) {
    const random = prng(seed);
    let applied = 0;
    for (let run = 0; run < 30; run++) {
      const first = randomState(random).IPv4;
      if (!first) continue;
      let index = await FragmentIndex.build('ip', first);
      let kernel = applyScript(
        emptyNftRuleset(),
        nftablesPlanner.render(nftablesPlanner.planFull({ IPv4: first })),
      );
      let prev = first;
      for (let step = 0; step < 5 && index; step++) {
        const drawn = randomState(random).IPv4;
        if (!drawn) continue;
        const next: ProxyState = { ...drawn, node: prev.node };
        const tx = fragmentStep(index, prev, next);
        if (!tx) {
          index = undefined;
          break;
        }
        kernel = applyScript(kernel, tx.toString());
        const expected = applyScript(
          emptyNftRuleset(),
          nftablesPlanner.render(nftablesPlanner.planFull({ IPv4: next })),
        );
        assert.deepEqual(dump(kernel), dump(expected), `run ${run} step ${step} of seed ${seed}`);
        applied++;
        prev = next;
      }
    }
    assert.ok(applied > 20, `seed ${seed}: only ${applied} fragment steps applied`);
  }
});

test('an endpoint change touches only its own elements; a shared count chain stays', async () => {
  const port = (name: string, ip: string, eps: string[]) =>
    servicePort(name, { clusterIP: ip, clusterEndpoints: eps.map((e) => endpoint(e)) });
  const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.244.1.${i + 1}`);
  const over = COUNTED_UP_TO + 1;
  const a = proxyState('IPv4', [port('a', '10.96.0.1', ips(over)), port('b', '10.96.0.2', ips(over))]);
  const b = proxyState('IPv4', [
    port('a', '10.96.0.1', ips(over + 1)),
    a.servicePorts.get('default/b:80/TCP')!,
  ]);
  const index = (await FragmentIndex.build('ip', a))!;
  const script = fragmentStep(index, a, b)!.toString();
  assert.match(script, new RegExp(`^add chain ip kproxy backends-tcp-${over + 1} `, 'm'));
  assert.doesNotMatch(script, new RegExp(`delete chain ip kproxy backends-tcp-${over}`), 'still used by b');
  assert.doesNotMatch(script, /10\.96\.0\.2/, 'b untouched');
  // Within the bound a count change is the count element: no chain, no dispatch element.
  const c = proxyState('IPv4', [port('a', '10.96.0.1', ips(2)), port('b', '10.96.0.2', ips(2))]);
  const d = proxyState('IPv4', [port('a', '10.96.0.1', ips(3)), c.servicePorts.get('default/b:80/TCP')!]);
  const within = fragmentStep((await FragmentIndex.build('ip', c))!, c, d)!.toString();
  assert.doesNotMatch(within, /chain|cluster-endpoints/, within);
  assert.match(within, /^add element ip kproxy backends-tcp-counts \{ 10\.96\.0\.1 \. 80 : 3 \}/m);
});

test("two service ports claiming one external IP break the model's guarantee: a bug, thrown", async () => {
  const claim = (name: string, ip: string) =>
    servicePort(name, {
      clusterIP: ip,
      externalIPs: ['192.168.5.5'],
      clusterEndpoints: [endpoint('10.244.1.1')],
    });
  await assert.rejects(
    FragmentIndex.build('ip', proxyState('IPv4', [claim('a', '10.96.0.1'), claim('b', '10.96.0.2')])),
    /default\/b:80\/TCP claims k vip 192\.168\.5\.5 \. tcp \. 80 of default\/a:80\/TCP/,
  );
  const one = proxyState('IPv4', [claim('a', '10.96.0.1')]);
  const two = proxyState('IPv4', [one.servicePorts.get('default/a:80/TCP')!, claim('b', '10.96.0.2')]);
  const index = (await FragmentIndex.build('ip', one))!;
  assert.throws(() => fragmentStep(index, one, two), /the model gives it to one/);
});

test("a Service's ports share its cluster-ips element: it goes with the last of them", async () => {
  const web = (port: number) => servicePort('web', { clusterIP: '10.96.0.1', port, clusterEndpoints: [] });
  const both = proxyState('IPv4', [web(80), web(443)]);
  const one = proxyState('IPv4', [both.servicePorts.get('default/web:80/TCP')!]);
  const none = proxyState('IPv4', []);
  const index = (await FragmentIndex.build('ip', both))!;
  const first = fragmentStep(index, both, one)!.toString();
  assert.match(first, /10\.96\.0\.1 \. tcp \. 443/, 'the removed port goes');
  assert.doesNotMatch(first, /cluster-ips/, 'the address is still served on port 80');
  const last = fragmentStep(index, one, none)!.toString();
  assert.match(last, /^delete element ip kproxy cluster-ips \{ 10\.96\.0\.1 \}$/m);
});
