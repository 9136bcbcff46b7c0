// Endpoint slots (endpoint-slots.ts): an endpoint keeps its index across incremental syncs, so one
// endpoint coming or going rewrites O(1) endpoint map elements whatever the key's size.
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/nftables/endpoint-slots.test.ts --name 'random changes|whole-set switch|many slices'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runAll } from '../../../contract/base/work-slices.ts';
import type { DualStackState, Endpoint, EndpointList, ServicePort } from '../../../contract/proxy-state.ts';
import { assignSlots, type SlotRecord } from '../../../dataplanes/nftables/endpoint-slots.ts';
import { FragmentIndex } from '../../../dataplanes/nftables/fragment-index.ts';
import { NftablesDataplane } from '../../../dataplanes/nftables/live.ts';
import { incrementalPlanSteps, nftablesPlanner } from '../../../dataplanes/nftables/planner.ts';
import type { NftFamily } from '../../../dataplanes/shared/nft/transaction.ts';
import { emptyNftRuleset } from '../../../dataplanes/shared/trace/nft-ruleset.ts';
import { ModelCache } from '../../../src/model/model-cache.ts';
import { options } from '../../model/fixtures.ts';
import { feed, WIDE_NODE, WideServiceChanges } from '../../model/wide-service-changes.ts';
import { prng } from '../../support/prng.ts';
import { testSeeds } from '../../support/seeds.ts';
import { applyScript, dump, dumpUpToNumbering, FakeNft } from './fake-nft.ts';
import { endpoint, ipv4, servicePort } from './fixtures.ts';
import { RecordingCommandRunner } from './recording-nft-runner.ts';

/** Endpoints 10.244.0.<n> for each n, in address order as the model sorts them (as text). */
function eps(...ns: number[]): Endpoint[] {
  return ns.map((n) => endpoint(`10.244.0.${n}`)).sort((a, b) => (a.ip < b.ip ? -1 : 1));
}

const ips = (order: EndpointList) => order.map((ep) => Number(ep.ip.split('.')[3]));

/** The slot order after a sync numbered `current` in the model's order (no slots kept). */
const order = (current: EndpointList, next: EndpointList) => assignSlots(current, current, next).order;

test('a new endpoint takes index N, whatever its address; the others keep theirs', () => {
  assert.deepEqual(ips(order(eps(10, 20, 30), eps(10, 15, 20, 30))), [10, 20, 30, 15]);
});

test("a removed endpoint's index gets the last one (swap-remove); the last one just goes", () => {
  assert.deepEqual(ips(order(eps(1, 2, 3, 4, 5), eps(1, 3, 4, 5))), [1, 5, 3, 4]);
  assert.deepEqual(ips(order(eps(1, 2, 3, 4, 5), eps(1, 2, 3, 4))), [1, 2, 3, 4]);
  // Several: holes lowest first, each from the end; a hole at the end is simply gone.
  assert.deepEqual(ips(order(eps(1, 2, 3, 4, 5, 6), eps(1, 4, 5))), [1, 5, 4]);
});

test('an arrival fills the hole of a departure in the same change', () => {
  assert.deepEqual(ips(order(eps(1, 2, 3), eps(1, 3, 9))), [1, 9, 3]);
});

test('a whole-set switch (ready endpoints gone, terminating ones serve) is the new set in address order', () => {
  const ready = eps(1, 2, 3);
  const terminating = [4, 5].map((n) =>
    endpoint(`10.244.0.${n}`, 8080, { ready: false, serving: true, terminating: true }),
  );
  assert.deepEqual(order(ready, terminating), terminating);
  assert.deepEqual(ips(order(terminating, ready)), [1, 2, 3]);
});

test('endpoints equal in address and port are matched one for one', () => {
  const a1 = endpoint('10.244.0.1', 8080, { isLocal: true });
  const a2 = endpoint('10.244.0.1', 8080);
  const b = endpoint('10.244.0.2');
  const c = endpoint('10.244.0.1', 9090);
  assert.deepEqual(order([a1, a2, b], [a2, b]), [a2, b]);
  // Slots [b, a1] of the model order [a1, b]: a2 comes at the end.
  assert.deepEqual(assignSlots([b, a1], [a1, b], [a1, a2, b]).order, [b, a1, a2]);
  // Same address, another port: another endpoint.
  assert.deepEqual(order([a1, b], [c, b]), [c, b]);
});

test('random changes: a permutation of the new set, rewriting at most 2 indexes per departure and 1 per arrival', () => {
  for (const seed of testSeeds({ first: 7 })) {
    const random = prng(seed);
    let current: EndpointList = [];
    let model: EndpointList = [];
    for (let step = 0; step < 300; step++) {
      const next = eps(...Array.from({ length: 40 }, (_, n) => n + 1).filter(() => random() < 0.7));
      const { order, changed } = assignSlots(current, model, next);
      assert.deepEqual(ips(order).sort(), ips(next).sort(), `seed ${seed}, step ${step}: the same endpoints`);
      const before = new Set(ips(current));
      const after = new Set(ips(next));
      const gone = [...before].filter((n) => !after.has(n)).length;
      const came = [...after].filter((n) => !before.has(n)).length;
      const rewritten: number[] = [];
      for (let i = 0; i < Math.max(order.length, current.length); i++)
        if (order.at(i)?.ip !== current.at(i)?.ip) rewritten.push(i);
      assert.ok(
        rewritten.length <= 2 * gone + came,
        `seed ${seed}, step ${step}: ${rewritten.length} indexes for -${gone} +${came}`,
      );
      // The indexes it names are every one rewritten (a plan writes only those), and no more.
      assert.deepEqual(changed, rewritten, `seed ${seed}, step ${step}: the changed indexes`);
      current = order;
      model = next;
    }
  }
});

/** A ClusterIP, external IP and node port service with `cluster` endpoints, eTP Local with `local`. */
function service(cluster: readonly Endpoint[], local: readonly Endpoint[] = []): ServicePort {
  return servicePort('wide', {
    clusterIP: '10.96.0.10',
    externalIPs: ['192.0.2.10'],
    nodePort: 30080,
    externalPolicyLocal: true,
    clusterEndpoints: [...cluster, ...local].sort((a, b) => (a.ip < b.ip ? -1 : 1)),
    localEndpoints: local,
  });
}

function fullSync(state: DualStackState) {
  return applyScript(emptyNftRuleset(), nftablesPlanner.render(nftablesPlanner.planFull(state)));
}

/** Incremental plans from one full sync, slots carried as the live dataplane carries them. */
class History {
  readonly slots = new Map<NftFamily, SlotRecord>();
  kernel;
  state: DualStackState;

  constructor(first: DualStackState) {
    this.state = first;
    this.kernel = fullSync(first);
  }

  /** What a full sync of the current state leaves in an empty kernel. */
  fullSync() {
    return fullSync(this.state);
  }

  /** The script of the step to `next`, applied to the kernel. */
  step(next: DualStackState): string {
    const plan = runAll(incrementalPlanSteps(this.state, next, { slots: this.slots }));
    const script = nftablesPlanner.render(plan);
    plan.commit?.();
    this.kernel = applyScript(this.kernel, script);
    this.state = next;
    return script;
  }
}

/** `add|delete <map> <element>` for each endpoint map element a script writes or deletes. */
function endpointElements(script: string): string[] {
  const out: string[] = [];
  let open: string | undefined;
  for (const line of script.split('\n')) {
    const statement = /^(add|delete) element ip kproxy (\S+) \{ ?(.*?)( \})?$/.exec(line);
    if (statement) {
      const [, verb, map, inline, closed] = statement;
      const indexed = /backends-tcp$/.test(map!);
      if (indexed && closed) out.push(`${verb} ${map} ${inline}`);
      open = indexed && !closed ? `${verb} ${map}` : undefined;
    } else if (open && line.startsWith('\t')) out.push(`${open} ${line.trim().replace(/,$/, '')}`);
    else open = undefined;
  }
  return out;
}

test('removing an endpoint from the middle rewrites its index and the count: the same endpoints as a full sync', () => {
  const all = eps(...Array.from({ length: 200 }, (_, n) => n + 1));
  const history = new History(ipv4([service(all)]));
  const hole = all.findIndex((ep) => ep.ip === '10.244.0.50');
  const script = history.step(ipv4([service(all.filter((ep) => ep.ip !== '10.244.0.50'))]));
  // Per key (ClusterIP, external IP, node port): the last index deleted, the hole rewritten.
  assert.deepEqual(
    endpointElements(script).filter((l) => l.includes('10.96.0.10')),
    [
      `delete backends-tcp 10.96.0.10 . 80 . ${hole}`,
      'delete backends-tcp 10.96.0.10 . 80 . 199',
      `add backends-tcp 10.96.0.10 . 80 . ${hole} : ${all.at(-1)!.ip} . 8080`,
    ],
  );
  assert.equal(endpointElements(script).length, 9, script);
  // The modulus: the key's one dispatch element goes to the count chain of 199.
  assert.match(
    script,
    /\t10\.96\.0\.10 \. tcp \. 80 comment "default\/wide:80\/TCP" : goto backends-tcp-199,/,
  );
  const full = history.fullSync();
  assert.deepEqual(dumpUpToNumbering(history.kernel), dumpUpToNumbering(full));
  assert.notDeepEqual(dump(history.kernel), dump(full), 'the numbering came from history');
});

test('a port left unchanged in other, equal objects (not the ModelCache), then changed: its endpoints are found by address and port', () => {
  const all = eps(...Array.from({ length: 40 }, (_, n) => n + 1));
  const kept = all.filter((ep) => ep.ip !== '10.244.0.5');
  const history = new History(ipv4([service(all)]));
  // Swap-removed: the slots are not the model's order, so the live dataplane keeps them.
  history.step(ipv4([service(kept)]));
  const copies = () => kept.map((ep) => ({ ...ep }));
  assert.equal(history.step(ipv4([service(copies())])), '', 'equal: nothing to send, the slots kept');
  // The kept slots hold the first objects; this change's model orders hold the copies.
  history.step(ipv4([service(copies().filter((ep) => ep.ip !== '10.244.0.20'))]));
  const full = history.fullSync();
  assert.deepEqual(dumpUpToNumbering(history.kernel), dumpUpToNumbering(full));
});

test('adds, removes, a whole-set switch and eTP Local changes: O(change) elements, the endpoints of a full sync', () => {
  for (const seed of testSeeds({ first: 3 })) {
    const random = prng(seed);
    const pool = Array.from({ length: 300 }, (_, n) => n + 1);
    const pick = () => eps(...pool.filter(() => random() < 0.5));
    // Local by address, as a pod stays on its node: the first state too, or its first step would
    // also fill the Local keys, which the bound below does not count (seeds 1 and 2 did).
    const stateOf = (endpoints: readonly Endpoint[]) => {
      // As the model gives them: unique by address, in address order (endpoint-slots.ts's input).
      const addresses = endpoints.map((ep) => ep.ip);
      assert.deepEqual(addresses, [...new Set(addresses)].sort(), `seed ${seed}: the model's order`);
      const local = endpoints
        .filter((ep) => Number(ep.ip.split('.')[3]) % 7 === 0)
        .map((ep) => ({ ...ep, isLocal: true }));
      const localIps = new Set(local.map((ep) => ep.ip));
      return ipv4([
        service(
          endpoints.filter((ep) => !localIps.has(ep.ip)),
          local,
        ),
      ]);
    };
    let cluster = pick();
    const history = new History(stateOf(cluster));
    // The terminating endpoints' addresses, each new (10.245.0.1, 10.245.0.2, ...).
    let terminated = 0;
    for (let step = 0; step < 30; step++) {
      const switching = step % 10 === 9;
      let next: Endpoint[];
      if (switching) {
        // All ready endpoints gone: the model falls back to the terminating ones, a disjoint set,
        // unique and in address order as the model gives them. (Renaming 10.244.0.n to 10.244.9.n
        // made two of one address at the second switch, and a Local list out of order, which the
        // model never gives: the walk took them as gone and come, over the bound (seed 682).)
        next = cluster
          .map(() => {
            const ip = `10.245.${Math.floor(terminated / 250)}.${(terminated % 250) + 1}`;
            terminated++;
            return endpoint(ip, 8080, { terminating: true });
          })
          .sort((a, b) => (a.ip < b.ip ? -1 : 1));
      } else {
        const gone = new Set(cluster.filter(() => random() < 0.02).map((ep) => ep.ip));
        const came = pool.filter(() => random() < 0.01).map((n) => `10.244.0.${n}`);
        const ipsNext = new Set([...cluster.map((ep) => ep.ip).filter((ip) => !gone.has(ip)), ...came]);
        next = [...ipsNext].sort().map((ip) => endpoint(ip));
      }
      const script = history.step(stateOf(next));
      const full = history.fullSync();
      assert.deepEqual(
        dumpUpToNumbering(history.kernel),
        dumpUpToNumbering(full),
        `seed ${seed}, step ${step}`,
      );
      if (!switching) {
        const changes =
          next.length + cluster.length - 2 * next.filter((ep) => cluster.some((c) => c.ip === ep.ip)).length;
        // 3 cluster keys and 2 Local ones, up to 3 element operations per change (a departure's
        // hole: delete, add; the last index: delete).
        assert.ok(
          endpointElements(script).length <= 5 * 3 * changes,
          `seed ${seed}, step ${step}: ${endpointElements(script).length} element lines for ${changes} changes`,
        );
      }
      cluster = next;
    }
  }
});

test('the intact check expects the numbering the incremental syncs left; a restart renumbers in place', async () => {
  const nft = new FakeNft();
  const commands = new RecordingCommandRunner();
  const live = new NftablesDataplane({ nft, commands });
  await live.start();
  const all = eps(...Array.from({ length: 20 }, (_, n) => n + 1));
  await live.sync(ipv4([service(all)]), 'full');
  await live.settled();
  const next = ipv4([service(all.filter((ep) => ep.ip !== '10.244.0.3'))]);
  assert.equal((await live.sync(next, 'incremental')).kind, 'incremental');
  const full = fullSync(next);
  assert.notDeepEqual(dump(nft.ruleset), dump(full), 'index 2 holds the last endpoint');
  // The check names each element with its value: with address-order numbering it would fail.
  for (let i = 0; i < 3; i++) assert.equal(await live.intact(), true, `check ${i}`);
  const restarted = new NftablesDataplane({ nft, commands });
  await restarted.start();
  await restarted.sync(next, 'full');
  assert.equal(await restarted.intact(), true);
  assert.deepEqual(dumpUpToNumbering(nft.ruleset), dumpUpToNumbering(full));
});

test("one endpoint change of a port with 10,000 endpoints builds the change's elements, not the port's", async () => {
  // Each element of an endpoint reads its address: the reads count the elements built and compared.
  let reads = 0;
  const counted = (ip: string, isLocal: boolean): Endpoint =>
    Object.defineProperty(endpoint(ip, 8080, { isLocal }), 'ip', {
      enumerable: true,
      get: () => {
        reads++;
        return ip;
      },
    });
  const ipOf = (n: number) => `10.244.${Math.floor(n / 250)}.${(n % 250) + 1}`;
  const all = Array.from({ length: 10_000 }, (_, n) => counted(ipOf(n), n % 7 === 0)).sort((a, b) =>
    a.ip < b.ip ? -1 : 1,
  );
  const local = all.filter((ep) => ep.isLocal);
  const first = ipv4([
    service(
      all.filter((ep) => !ep.isLocal),
      local,
    ),
  ]);
  const gone = all[5000]!;
  const came = counted('10.245.0.1', true);
  const rest = all.filter((ep) => ep !== gone);
  const next = ipv4([
    service(
      rest.filter((ep) => !ep.isLocal),
      [...rest.filter((ep) => ep.isLocal), came],
    ),
  ]);
  const indexes = new Map([['ip' as const, (await FragmentIndex.build('ip', first.IPv4!))!]]);
  reads = 0;
  const plan = runAll(incrementalPlanSteps(first, next, { slots: new Map(), indexes }));
  const script = nftablesPlanner.render(plan);
  assert.equal(plan.kind, 'fragments');
  // The old path built both sides' 2 x 10,000 elements per key and compared them: ~150,000 reads.
  assert.ok(reads < 100, `${reads} endpoint addresses read for one endpoint out and one in`);
  // The hole of the three cluster keys (ClusterIP, external IP, node port) gets the newcomer; it
  // goes at the end of the two Local keys.
  assert.deepEqual(
    endpointElements(script),
    [
      'delete backends-tcp 10.96.0.10 . 80 . 5000',
      'delete backends-tcp 192.0.2.10 . 80 . 5000',
      'delete nodeport-backends-tcp 30080 . 5000',
      'add backends-tcp 10.96.0.10 . 80 . 5000 : 10.245.0.1 . 8080',
      'add backends-tcp 192.0.2.10 . 80 . 5000 : 10.245.0.1 . 8080',
      'add nodeport-backends-tcp 30080 . 5000 : 10.245.0.1 . 8080',
      'add local-backends-tcp 192.0.2.10 . 80 . 1429 : 10.245.0.1 . 8080',
      'add nodeport-local-backends-tcp 30080 . 1429 : 10.245.0.1 . 8080',
    ],
    script,
  );
  assert.match(script, /add element ip kproxy hairpin \{ 10\.245\.0\.1 \. 10\.245\.0\.1 \}/);
  const kernel = applyScript(fullSync(first), script);
  const full = fullSync(next);
  assert.deepEqual(dumpUpToNumbering(kernel), dumpUpToNumbering(full));
});

test('a Service with many slices through the ModelCache, its lists chunked: each step leaves the endpoints of a full sync', () => {
  for (const seed of testSeeds({ first: 1, count: 3 })) {
    const random = prng(seed);
    const wide = new WideServiceChanges((n) => Math.floor(random() * n));
    // Lists past 8 in chunks of 4: the model's lists and the slot orders made from them.
    const cache = new ModelCache(options(), { chunkedFrom: 8, chunk: 4 });
    cache.setNode(WIDE_NODE);
    cache.setService(wide.service);
    feed(cache, wide.initial());
    const history = new History(cache.update().state);
    for (let step = 1; step <= 40; step++) {
      feed(cache, wide.step());
      history.step(cache.update().state);
      // A wrong step stays in the kernel: compared every fourth step, as the full render costs.
      if (step % 4 !== 0) continue;
      const full = history.fullSync();
      assert.deepEqual(
        dumpUpToNumbering(history.kernel),
        dumpUpToNumbering(full),
        `seed ${seed}, step ${step}`,
      );
    }
  }
});
