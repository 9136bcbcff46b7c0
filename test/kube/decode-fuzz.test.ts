// Seeded mutations of every object of examples/cluster.yaml (fields deleted, nulled, of the wrong
// type, out of range, bad IPs, duplicate ports, 10k endpoints, unicode names, deep nesting) run
// through decodeObject, buildProxyState and the three planners: nothing throws, every invalid
// object is a Problem naming it, and (as root, for a few seeds) the nftables output loads.
// Sweep its seeds: nice -n 10 node scripts/sweep-seeds.ts test/kube/decode-fuzz.test.ts (as root, the
// first 12 seeds of each process load into a kernel: --batch 12 loads every one)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { parse } from 'yaml';
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { iptablesPlanner } from '../../dataplanes/iptables/planner.ts';
import { ipvsPlanner } from '../../dataplanes/ipvs/planner.ts';
import { nftablesPlanner } from '../../dataplanes/nftables/planner.ts';
import { Lab, requireRoot } from '../../harness/netns.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, Node, Service } from '../../src/kube/objects.ts';
import { buildProxyState, type ProxyOptions } from '../../src/model/build-state.ts';
import { nftLoad } from '../dataplanes/nftables/kernel-support.ts';
import { prng } from '../support/prng.ts';
import { seedsLine, testSeeds } from '../support/seeds.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Random = () => number;

const EXAMPLE = new URL('../../examples/cluster.yaml', import.meta.url);
const ITEMS = (parse(readFileSync(EXAMPLE, 'utf8')) as { items: Json[] }).items;
const OPTIONS: ProxyOptions = {
  nodeName: 'node-1',
  nodeIPs: ['192.168.10.11', 'fd00:192:168:10::11'],
  detectLocalMode: 'ClusterCIDR',
  clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
  masqueradeAll: false,
  masqueradeBit: 14,
  nodePortAddresses: [],
};
const PLANNERS: Readonly<Record<string, DataplanePlanner<unknown>>> = {
  nftables: nftablesPlanner,
  iptables: iptablesPlanner,
  ipvs: ipvsPlanner,
};
const SEEDS = testSeeds({ first: 1, count: 100 });

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const clone = (value: Json): Json => structuredClone(value);

/** Every (container, key) in a document, so a mutation can hit any field at any depth. */
function slots(value: Json, out: [Json[] | { [key: string]: Json }, string | number][] = []) {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      out.push([value, i]);
      slots(item, out);
    });
  } else if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      out.push([value, key]);
      slots(value[key]!, out);
    }
  }
  return out;
}

function deeplyNested(depth: number): Json {
  let value: Json = 'bottom';
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value];
  return value;
}

const BAD_VALUES: readonly Json[] = [
  null,
  '',
  '1.2.3',
  '10.0.0.1/33',
  'fd00::1',
  -1,
  0,
  2 ** 53,
  1e308,
  70000,
  1.5,
  true,
  [],
  {},
  'wéb-😀-\u202e',
  'a"b;c\n}',
  'x'.repeat(5000),
];

/** One random change to a document; the object's identity (kind, name) usually stays. */
function mutate(random: Random, document: Json): string {
  const all = slots(document);
  const roll = random();
  const [container, key] = pick(random, all);
  const set = (value: Json) => {
    (container as Record<string | number, Json>)[key] = value;
  };
  if (roll < 0.2) {
    if (Array.isArray(container)) container.splice(key as number, 1);
    else delete (container as Record<string, Json>)[key];
    return `delete ${key}`;
  }
  if (roll < 0.7) {
    const value = pick(random, BAD_VALUES);
    set(value);
    return `${key} = ${JSON.stringify(value)?.slice(0, 40)}`;
  }
  if (roll < 0.75) {
    set(deeplyNested(2000));
    return `${key} = deep nesting`;
  }
  if (roll < 0.8) {
    const meta = (document as { metadata?: { name?: Json } }).metadata;
    if (meta !== null && typeof meta === 'object')
      meta.name = pick(random, ['wéb-😀', 'a b', 'A.B', 'a\nb', 'a"b', 'x'.repeat(300)]);
    return 'unicode/odd name';
  }
  if (roll < 0.87) {
    const ports =
      (document as { spec?: { ports?: Json[] }; ports?: Json[] }).spec?.ports ??
      (document as { ports?: Json[] }).ports;
    if (Array.isArray(ports) && ports.length > 0) ports.push(clone(ports[0]!));
    return 'duplicate port';
  }
  if (roll < 0.93) {
    const endpoints = (document as { endpoints?: Json[] }).endpoints;
    if (Array.isArray(endpoints) && endpoints.length > 0) {
      const v6 = (document as { addressType?: Json }).addressType === 'IPv6';
      const template = endpoints[0]!;
      for (let i = 0; i < 10_000; i++) {
        const endpoint = clone(template) as { addresses: Json };
        endpoint.addresses = [
          v6 ? `fd00:10:244:9::${(i + 1).toString(16)}` : `10.244.${200 + (i >> 8)}.${i & 255}`,
        ];
        endpoints.push(endpoint);
      }
    }
    return '10k endpoints';
  }
  const endpoints = (document as { endpoints?: { addresses?: Json }[] }).endpoints;
  const v4 = (document as { addressType?: Json }).addressType === 'IPv4';
  if (Array.isArray(endpoints) && endpoints.length > 0)
    endpoints[0]!.addresses = [v4 ? 'fd00::1' : '10.0.0.1'];
  return 'wrong-family endpoint';
}

interface Outcome {
  readonly state: DualStackState;
  readonly changes: readonly string[];
}

function runSeed(seed: number): Outcome {
  const random = prng(seed);
  const documents = ITEMS.map(clone);
  const changes: string[] = [];
  for (let n = 1 + Math.floor(random() * 3); n > 0; n--) {
    const i = Math.floor(random() * documents.length);
    changes.push(`item ${i}: ${mutate(random, documents[i]!)}`);
  }
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  let node: Node | undefined;
  for (const raw of documents) {
    const decoded = decodeObject(raw);
    if (decoded.kind === 'invalid') {
      const { object, reason } = decoded.problem;
      const meta = (raw as { metadata?: { name?: unknown } } | null)?.metadata;
      const name = meta !== null && typeof meta === 'object' ? meta.name : undefined;
      if (typeof name === 'string' && name !== '')
        assert.ok(object.includes(name), `${object} names ${name}`);
      assert.ok(reason.length > 0 && !reason.includes('\n    at '), `one-line reason: ${reason}`);
    } else if (decoded.kind === 'object') {
      const object = decoded.object;
      if (object.kind === 'Service') services.push(object);
      else if (object.kind === 'EndpointSlice') endpointSlices.push(object);
      else if (object.kind === 'Node' && object.metadata.name === OPTIONS.nodeName) node = object;
    }
  }
  return { state: buildProxyState({ services, endpointSlices, node }, OPTIONS).state, changes };
}

const BASE = runSeedless();
function runSeedless(): DualStackState {
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  for (const raw of ITEMS) {
    const decoded = decodeObject(raw);
    assert.equal(decoded.kind, 'object');
    if (decoded.kind !== 'object') continue;
    if (decoded.object.kind === 'Service') services.push(decoded.object);
    if (decoded.object.kind === 'EndpointSlice') endpointSlices.push(decoded.object);
  }
  return buildProxyState({ services, endpointSlices }, OPTIONS).state;
}

/** The nftables scripts of the seeds checked on the kernel. */
const toLoad: { seed: number; changes: readonly string[]; script: string }[] = [];

test(`mutated example objects never crash decode, model or any planner (seeds ${SEEDS[0]}..${SEEDS.at(-1)})`, () => {
  process.stdout.write(seedsLine('decode fuzz', SEEDS));
  for (const seed of SEEDS) {
    let outcome: Outcome | undefined;
    try {
      outcome = runSeed(seed);
      for (const [mode, planner] of Object.entries(PLANNERS)) {
        const full = planner.render(planner.planFull(outcome.state));
        assert.equal(typeof full, 'string', mode);
        planner.render(planner.planIncremental(BASE, outcome.state));
        planner.render(planner.planIncremental(outcome.state, BASE));
        if (mode === 'nftables' && seed - SEEDS[0]! < 12)
          toLoad.push({ seed, changes: outcome.changes, script: full });
      }
    } catch (error) {
      assert.fail(
        `seed ${seed} (${outcome?.changes.join('; ') ?? 'while decoding'}): ${(error as Error).stack}`,
      );
    }
  }
});

test('targeted invalid values are Problems naming the object and field', () => {
  const slice = structuredClone(
    ITEMS.find((item) => (item as { kind: string }).kind === 'EndpointSlice'),
  ) as {
    metadata: { name: string };
    addressType: string;
    endpoints: { addresses: string[] }[];
    ports: unknown[];
  };
  const service = structuredClone(ITEMS.find((item) => (item as { kind: string }).kind === 'Service')) as {
    metadata: { name: string };
    spec: { ports: { port: number }[] };
  };
  const cases: [string, unknown, string][] = [];
  const badIP = structuredClone(slice);
  badIP.endpoints[0]!.addresses = ['1.2.3'];
  cases.push(['bad IP', badIP, 'endpoints[0].addresses[0]']);
  const otherFamily = structuredClone(slice);
  otherFamily.endpoints[0]!.addresses = [slice.addressType === 'IPv4' ? 'fd00::1' : '10.0.0.1'];
  cases.push(['IP of the other family', otherFamily, 'endpoints[0].addresses[0]']);
  const hugePort = structuredClone(service);
  hugePort.spec.ports[0]!.port = 2 ** 40;
  cases.push(['huge port', hugePort, 'spec.ports[0].port']);
  const duplicate = structuredClone(service);
  duplicate.spec.ports.push(structuredClone(duplicate.spec.ports[0]!));
  cases.push(['duplicate port', duplicate, 'spec.ports[1]']);
  for (const [what, raw, field] of cases) {
    const decoded = decodeObject(raw);
    assert.equal(decoded.kind, 'invalid', what);
    if (decoded.kind !== 'invalid') continue;
    const name = (raw as { metadata: { name: string } }).metadata.name;
    assert.ok(decoded.problem.object.includes(name), `${what}: ${decoded.problem.object}`);
    assert.ok(decoded.problem.reason.startsWith(field), `${what}: ${decoded.problem.reason}`);
  }
});

test('the nftables output of mutated objects loads into a kernel', async (t) => {
  if (!requireRoot(t, 'loads rendered nftables scripts into a throwaway namespace')) return;
  assert.ok(toLoad.length > 0, 'the fuzz test ran first and kept scripts');
  const lab = new Lab('decodefuzz');
  after(() => lab.destroy());
  for (const { seed, changes, script } of toLoad) {
    const ns = await lab.addNetns(`s${seed}`);
    try {
      await nftLoad(lab, ns, script);
    } catch (error) {
      assert.fail(
        `seed ${seed} (${changes.join('; ')}): nft rejected the script: ${(error as Error).message.slice(0, 2000)}`,
      );
    }
  }
});
