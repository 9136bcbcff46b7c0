// The incremental IPVS plan builds only the changed service ports (and those sharing a piece with
// them), yet must be byte-identical to the diff of the two whole desired states, and a kernel
// driven by such plans must end where a full sync of the last state puts it.
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/ipvs/incremental.test.ts --name 'incremental plans equal|after incremental syncs holds'
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changedServicePorts } from '../../../contract/changed-service-ports.ts';
import type { SyncOutcome } from '../../../contract/dataplane.ts';
import type {
  DualStackState,
  ProxyState,
  ServicePort,
  ServicePortKey,
} from '../../../contract/proxy-state.ts';
import { COMPANION_TABLE } from '../../../dataplanes/ipvs/companion-ruleset.ts';
import { diffAddresses, diffVirtualServers } from '../../../dataplanes/ipvs/ipvs-diff.ts';
import type { IpvsPlan } from '../../../dataplanes/ipvs/ipvs-plan.ts';
import { renderPlan } from '../../../dataplanes/ipvs/ipvs-render.ts';
import { IpvsDataplane } from '../../../dataplanes/ipvs/live.ts';
import {
  companionDesired,
  ipvsDesired,
  ipvsIncremental,
  type SharingIndexes,
} from '../../../dataplanes/ipvs/planner.ts';
import { SharingIndex } from '../../../dataplanes/ipvs/sharing-index.ts';
import type { VirtualServer } from '../../../dataplanes/ipvs/virtual-servers.ts';
import { diffRulesets } from '../../../dataplanes/shared/nft/diff.ts';
import { endpoint, ipv4, servicePort } from '../../../harness/proxy-states.ts';
import { prng } from '../../support/prng.ts';
import { testSeeds } from '../../support/seeds.ts';
import { randomState } from '../nftables/random-state.ts';
import { applyOps, dumpServing, fromDesired } from './fake-ipvs.ts';
import { FakeKernel } from './fake-kernel.ts';

const RR = { scheduler: 'rr' };

/** What planIncremental was before it planned by service port: the diff of both whole states. */
function wholeStateDiff(prev: DualStackState, next: DualStackState): IpvsPlan {
  const before = ipvsDesired(prev, RR);
  const after = ipvsDesired(next, RR);
  return {
    kind: 'incremental',
    ops: diffVirtualServers(before, after),
    addresses: diffAddresses(before.boundAddresses, after.boundAddresses),
    nft: diffRulesets(companionDesired(prev, RR), companionDesired(next, RR), COMPANION_TABLE),
  };
}

function withoutKey(sp: ServicePort): Omit<ServicePort, 'key'> {
  const { key: _, ...rest } = sp;
  return rest;
}

/**
 * The next state of a sequence: mostly `prev` with a few ports added, changed or removed (so the
 * per-port path runs beside unchanged ports), now and then a whole new state (families and node
 * settings change: the whole-state path). A port sometimes gets its external IP on the node
 * address at a node port's number: the one virtual server two ports can both make (the model
 * keeps VIPs and node ports apart, not both).
 */
function nextState(random: () => number, prev: DualStackState): DualStackState {
  if (random() < 0.1) return randomState(random);
  let pool = randomState(random);
  while (!pool.IPv4 || !pool.IPv6) pool = randomState(random);
  const family = (before: ProxyState | undefined, drawn: ProxyState) => {
    if (!before) return undefined;
    const ports = new Map(before.servicePorts);
    for (const key of before.servicePorts.keys()) if (random() < 0.15) ports.delete(key);
    for (const sp of drawn.servicePorts.values()) {
      if (random() > 0.3) continue;
      const port =
        random() < 0.3
          ? servicePort(sp.name, {
              ...withoutKey(sp),
              port: 30000 + Math.floor(random() * 8),
              externalIPs: [before.node.nodeIPs[0]!],
            })
          : sp;
      ports.set(port.key, port);
    }
    const sorted = [...ports].sort(([a], [b]) => (a < b ? -1 : 1));
    return { family: before.family, node: before.node, servicePorts: new Map(sorted) };
  };
  const v4 = family(prev.IPv4, pool.IPv4);
  const v6 = family(prev.IPv6, pool.IPv6);
  return { ...(v4 && { IPv4: v4 }), ...(v6 && { IPv6: v6 }) };
}

function changedKeys(prev: DualStackState, next: DualStackState): Set<ServicePortKey> {
  return new Set([
    ...changedServicePorts(prev.IPv4, next.IPv4),
    ...changedServicePorts(prev.IPv6, next.IPv6),
  ]);
}

test('incremental plans equal the whole-state diff and reach the kernel a full sync of the last state makes', () => {
  for (const seed of testSeeds({ first: 1, count: 100 })) {
    const random = prng(seed);
    let prev = randomState(random);
    const table = fromDesired(ipvsDesired(prev, RR));
    const addresses = new Set(ipvsDesired(prev, RR).boundAddresses);
    const record = new Map(ipvsDesired(prev, RR).virtualServers);
    // Kept across the steps as the live dataplane keeps it; `told` builds its own each step.
    const sharing: SharingIndexes = new Map();
    for (let step = 0; step < 6; step++) {
      const next = nextState(random, prev);
      const expected = renderPlan(wholeStateDiff(prev, next));
      const change = ipvsIncremental(prev, next, RR, undefined, sharing);
      assert.equal(renderPlan(change.plan), expected, `seed ${seed} step ${step}`);
      const told = ipvsIncremental(prev, next, RR, changedKeys(prev, next));
      assert.equal(renderPlan(told.plan), expected, `seed ${seed} step ${step}, changed given`);
      change.commit();
      applyOps(table, change.plan.ops);
      for (const address of change.plan.addresses.add) {
        assert.ok(!addresses.has(address), `seed ${seed}: ${address} added twice`);
        addresses.add(address);
      }
      for (const address of change.plan.addresses.delete) assert.ok(addresses.delete(address));
      for (const [key, vs] of change.virtualServers) {
        if (vs === undefined) record.delete(key);
        else record.set(key, vs);
      }
      const desired = ipvsDesired(next, RR);
      assert.deepEqual(sortedEntries(record), sortedEntries(desired.virtualServers), `seed ${seed} record`);
      prev = next;
    }
    const final = ipvsDesired(prev, RR);
    assert.deepEqual(dumpServing(table), dumpServing(fromDesired(final)), `seed ${seed}`);
    assert.deepEqual([...addresses].sort(), [...final.boundAddresses].sort(), `seed ${seed}`);
  }
});

function sortedEntries(map: ReadonlyMap<string, VirtualServer>): [string, VirtualServer][] {
  return [...map].sort(([a], [b]) => (a < b ? -1 : 1));
}

test('the live dataplane after incremental syncs holds and counts what a full sync of the last state does', async () => {
  for (const seed of testSeeds({ first: 1001, count: 20 })) {
    const random = prng(seed);
    const kernel = new FakeKernel();
    const dp = new IpvsDataplane({ runner: kernel.runner(), openClient: async () => kernel.client() });
    await dp.start();
    let state = randomState(random);
    await dp.sync(state, 'full');
    let outcome: SyncOutcome | undefined;
    for (let step = 0; step < 5; step++) {
      const next = nextState(random, state);
      outcome = await dp.sync(next, 'incremental', changedKeys(state, next));
      assert.equal(outcome.kind, 'incremental', `seed ${seed} step ${step}`);
      state = next;
    }
    const fresh = new FakeKernel();
    const full = new IpvsDataplane({ runner: fresh.runner(), openClient: async () => fresh.client() });
    await full.start();
    const fullOutcome = await full.sync(state, 'full');
    const serving = (k: FakeKernel) => k.ipvs().filter((line) => !line.endsWith(' w=0'));
    assert.deepEqual(serving(kernel), serving(fresh), `seed ${seed}`);
    assert.deepEqual([...kernel.addresses].sort(), [...fresh.addresses].sort(), `seed ${seed}`);
    assert.equal(outcome?.objectCount, fullOutcome.objectCount, `seed ${seed}`);
  }
});

test('an endpoint change among 5,000 node-port services builds that one service port only', () => {
  const read = new Set<ServicePortKey>();
  // Building a port's virtual servers or elements reads its endpoints; finding the ports that
  // share a piece with it does not (it has no local endpoint).
  const counted = (sp: ServicePort): ServicePort =>
    Object.defineProperty({ ...sp }, 'clusterEndpoints', {
      enumerable: true,
      get: () => {
        read.add(sp.key);
        return sp.clusterEndpoints;
      },
    });
  const ports = Array.from({ length: 5000 }, (_, i) =>
    counted(
      servicePort(`svc${i}`, {
        clusterIP: `10.96.${i >> 8}.${i & 255}`,
        nodePort: 30000 + (i % 2700),
        protocol: i < 2700 ? 'TCP' : 'UDP',
        clusterEndpoints: [endpoint(`10.244.${i >> 8}.${i & 255}`)],
      }),
    ),
  );
  const prev = ipv4(ports);
  const changed = ports[2500]!;
  const moved = counted({ ...changed, clusterEndpoints: [endpoint('10.244.200.1')] });
  const next = ipv4(ports.map((sp) => (sp === changed ? moved : sp)));
  // The live dataplane keeps the index across syncs; building it reads every port.
  const sharing: SharingIndexes = new Map([['IPv4', SharingIndex.of(prev.IPv4!)]]);
  read.clear();
  const change = ipvsIncremental(prev, next, RR, new Set([changed.key]), sharing);
  assert.deepEqual([...read], [changed.key]);
  assert.deepEqual(
    change.plan.ops.map((op) => `${op.op} ${op.service.address}:${op.service.port}`),
    [
      'add-server 10.100.0.11:32500',
      'add-server 10.96.9.196:80',
      'drain-server 10.100.0.11:32500',
      'drain-server 10.96.9.196:80',
    ],
  );
  assert.deepEqual([...change.virtualServers.keys()], ['TCP 10.100.0.11:32500', 'TCP 10.96.9.196:80']);
});

test('ClientIP: an endpoint swap builds that one port; a real-server count that changes plans from the whole state', () => {
  const read = new Set<ServicePortKey>();
  const counted = (sp: ServicePort): ServicePort =>
    Object.defineProperty({ ...sp }, 'clusterEndpoints', {
      enumerable: true,
      get: () => {
        read.add(sp.key);
        return sp.clusterEndpoints;
      },
    });
  const ports = Array.from({ length: 2000 }, (_, i) =>
    counted(
      servicePort(`svc${i}`, {
        clusterIP: `10.96.${i >> 8}.${i & 255}`,
        sessionAffinity: { timeoutSeconds: 10800 },
        clusterEndpoints: [endpoint(`10.244.${i >> 8}.${i & 255}`)],
      }),
    ),
  );
  const prev = ipv4(ports);
  const sharing: SharingIndexes = new Map([['IPv4', SharingIndex.of(prev.IPv4!)]]);
  const changed = ports[1500]!;
  const change = (endpoints: ServicePort['clusterEndpoints']) => {
    const moved = counted({ ...changed, clusterEndpoints: endpoints });
    const next = ipv4(ports.map((sp) => (sp === changed ? moved : sp)));
    read.clear();
    const plan = ipvsIncremental(prev, next, RR, new Set([changed.key]), sharing).plan;
    const built = read.size;
    assert.equal(renderPlan(plan), renderPlan(wholeStateDiff(prev, next)));
    return { plan, read: built };
  };
  // The chains (affinity-record-10800, affinity-tcp-1) stay: elements only.
  const swap = change([endpoint('10.244.200.1')]);
  assert.equal(swap.read, 1);
  assert.match(
    swap.plan.nft.toString(),
    /affinity-endpoints \{ 10\.96\.5\.220 \. tcp \. 80 \. 0 : 10\.244\.200\.1 \. 8080 \}/,
  );
  assert.doesNotMatch(swap.plan.nft.toString(), /chain/);
  // A second real server: affinity-tcp-2 comes, affinity-tcp-1 stays (the other ports use it).
  const grown = change([endpoint('10.244.200.1'), endpoint('10.244.200.2')]);
  assert.ok(grown.read > 1, 'the whole state');
  assert.match(grown.plan.nft.toString(), /add chain ip kproxy-ipvs affinity-tcp-2 /);
  assert.doesNotMatch(grown.plan.nft.toString(), /delete chain/);
});
