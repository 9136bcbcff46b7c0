// The kept candidate lists of ports with several slices (src/model/candidate-merges.ts): after any
// sequence of slice changes, a port's candidates are those made from scratch from its slices.
// Sweep its seeds:
//   nice -n 10 node scripts/sweep-seeds.ts test/model/candidate-merges.test.ts
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHUNKS, ChunkedList, type ChunkShape } from '../../contract/chunked-list.ts';
import { decodeObject } from '../../src/kube/decode.ts';
import type { EndpointSlice, KubeObject } from '../../src/kube/objects.ts';
import { CandidateMerges } from '../../src/model/candidate-merges.ts';
import {
  type PortCandidates,
  portCandidates,
  type SliceEndpoints,
  type SlicePortSource,
  sliceEndpoints,
  slicePortsByKey,
} from '../../src/model/endpoints.ts';
import { ModelCache } from '../../src/model/model-cache.ts';
import { prng } from '../support/prng.ts';
import { testSeeds } from '../support/seeds.ts';
import { addresses, endpoint, node, options, service, slice, THIS_NODE } from './fixtures.ts';

const SERVICE = 'default/web';
/** Chunks of three in lists past four: every merged list chunked, its edits splitting chunks. */
const SMALL_CHUNKS: ChunkShape = { chunkedFrom: 4, chunk: 3 };
const MATCH_KEY = 'http/TCP';

/** Whole numbers in [0, n) from the shared seeded source, so a failing seed can be replayed. */
function random(seed: number): (n: number) => number {
  const next = prng(seed);
  return (n) => Math.floor(next() * n);
}

/**
 * A slice of up to 8 endpoints from `pool` addresses: a small pool makes copies of one address in
 * two slices (the lists that are rebuilt), a large one few. Its port is 8080 or 8081, so one
 * address may serve under two ports.
 */
function randomSlice(pick: (n: number) => number, name: string, pool: number): EndpointSlice {
  const endpoints = Array.from({ length: pick(9) }, () =>
    endpoint(`10.244.${pick(2)}.${1 + pick(pool)}`, {
      ready: [true, true, false][pick(3)]!,
      terminating: pick(5) === 0,
      nodeName: [THIS_NODE, 'node-2'][pick(2)]!,
      ...(pick(6) === 0 && { zones: [['zone-a', 'zone-b'][pick(2)]!] }),
    }),
  );
  return slice('web', endpoints, { name, ports: [{ name: 'http', port: 8080 + pick(2), protocol: 'TCP' }] });
}

function sourcesOf(records: ReadonlyMap<string, SliceEndpoints>): readonly SlicePortSource[] {
  const inNameOrder = [...records.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  return slicePortsByKey(inNameOrder, 'IPv4').get(MATCH_KEY) ?? [];
}

function candidatesOf(
  merges: CandidateMerges,
  sources: readonly SlicePortSource[],
): PortCandidates | undefined {
  return merges.ofService(SERVICE, 'IPv4', (candidates) =>
    sources.length === 0 ? undefined : candidates(MATCH_KEY, sources),
  );
}

/**
 * What a consumer reads: each candidate, and its endpoint by identity (dataplanes compare
 * pointers); the endpoints' array and the counts where given.
 */
function assertSame(
  found: PortCandidates | undefined,
  expected: PortCandidates | undefined,
  where: string,
  shape: ChunkShape = CHUNKS,
): void {
  assert.deepEqual(found && [...found.candidates], expected && [...expected.candidates], where);
  found?.candidates.forEach((c, i) => {
    assert.equal(c.endpoint, expected!.candidates.at(i)!.endpoint, `${where}: endpoint ${i} by identity`);
  });
  if (found?.whole !== undefined)
    assert.deepEqual(
      [...found.whole],
      found.candidates.map((c) => c.endpoint),
      `${where}: whole`,
    );
  for (const list of [found?.candidates, found?.whole])
    if (list instanceof ChunkedList)
      assert.ok(
        list.chunks.every((chunk) => chunk.length > 0 && chunk.length <= 2 * shape.chunk),
        `${where}: no chunk empty or past twice the size`,
      );
  if (found?.counts !== undefined)
    assert.deepEqual(
      found.counts,
      {
        ready: found.candidates.filter((c) => c.endpoint.ready).length,
        hinted: found.candidates.filter((c) => c.zoneHints.length + c.nodeHints.length > 0).length,
      },
      `${where}: counts`,
    );
}

describe('CandidateMerges', () => {
  it('gives the candidates made from scratch after random slice changes, merging most of them', () => {
    const seeds = testSeeds({ first: 1, count: 40 });
    let merged = 0;
    let steps = 0;
    for (const seed of seeds) {
      const pick = random(seed);
      const pool = [6, 60, 250][pick(3)]!;
      // Lists of a few are chunked at odd seeds, kept as arrays at even ones.
      const shape = seed % 2 === 1 ? SMALL_CHUNKS : CHUNKS;
      const merges = new CandidateMerges(shape);
      const records = new Map<string, SliceEndpoints>();
      let last: PortCandidates | undefined;
      for (let step = 0; step < 30; step++) {
        const name = `web-${pick(8)}`;
        const key = `default/${name}`;
        const what = pick(10);
        if (what < 2) records.delete(key);
        else if (what < 3) merges.forget(SERVICE);
        else {
          const record = sliceEndpoints(
            randomSlice(pick, name, pool),
            SERVICE,
            THIS_NODE,
            [],
            key,
            records.get(key),
          );
          records.set(key, record);
        }
        const sources = sourcesOf(records);
        const found = candidatesOf(merges, sources);
        const where = `seed ${seed}, step ${step}, ${sources.length} sources`;
        assertSame(found, sources.length === 0 ? undefined : portCandidates(sources), where, shape);
        // A merge keeps the candidate objects of the slices it did not touch.
        const kept = new Set(last?.candidates);
        if (sources.length > 1 && found!.candidates.some((c) => kept.has(c))) merged++;
        steps++;
        last = found;
      }
    }
    assert.ok(merged > steps / 4, `merged ${merged} of ${steps} steps`);
  });

  it('merges one changed slice of a wide port, keeping every other candidate and chunk', () => {
    const shape = { chunkedFrom: 100, chunk: 16 };
    const merges = new CandidateMerges(shape);
    const records = new Map<string, SliceEndpoints>();
    const wide = (s: number, moved: boolean) =>
      slice(
        'web',
        Array.from({ length: 20 }, (_, j) => endpoint(`10.${s}.0.${j === 0 && moved ? 200 : j + 1}`)),
        { name: `web-${s}` },
      );
    for (let s = 0; s < 50; s++)
      records.set(
        `default/web-${s}`,
        sliceEndpoints(wide(s, false), SERVICE, THIS_NODE, [], `default/web-${s}`),
      );
    const before = candidatesOf(merges, sourcesOf(records))!;
    const previous = records.get('default/web-7');
    records.set(
      'default/web-7',
      sliceEndpoints(wide(7, true), SERVICE, THIS_NODE, [], 'default/web-7', previous),
    );
    const sources = sourcesOf(records);
    const after = candidatesOf(merges, sources)!;
    assertSame(after, portCandidates(sources), 'after the change', shape);
    const kept = new Set(before.candidates);
    assert.equal(after.candidates.filter((c) => kept.has(c)).length, 50 * 20 - 20);
    assert.ok(after.candidates.some((c) => c.ip === '10.7.0.200'));
    // The slice's 20 endpoints are together in address order: the lists copy the chunks they
    // touch (one or two of 16, then a split) and share the ~60 others.
    for (const [list, was] of [
      [after.whole, before.whole],
      [after.candidates, before.candidates],
    ] as const) {
      assert.ok(list instanceof ChunkedList && was instanceof ChunkedList);
      const shared = new Set<unknown>(was.chunks);
      const copied = list.chunks.filter((chunk) => !shared.has(chunk)).length;
      assert.ok(copied <= 4, `${copied} of ${list.chunks.length} chunks copied`);
    }
  });

  it('leaves a merged port whose every endpoint is ready and hinted to topology: its Cluster set is the zone of the node', () => {
    const decoded = <T extends KubeObject>(raw: T): T => {
      const result = decodeObject(raw);
      if (result.kind !== 'object') assert.fail(`fixture does not decode: ${JSON.stringify(result)}`);
      return result.object as T;
    };
    const cache = new ModelCache(options());
    cache.setNode(decoded(node(THIS_NODE, { internalIPs: ['192.168.0.1'], zone: 'zone-a' })));
    cache.setService(decoded(service('web', { clusterIP: '10.96.0.10' })));
    const hinted = (name: string, zones: readonly [string, string][]) =>
      decoded(
        slice(
          'web',
          zones.map(([ip, zone]) => endpoint(ip, { ready: true, zones: [zone] })),
          { name },
        ),
      );
    cache.setEndpointSlice(
      hinted('web-1', [
        ['10.244.1.1', 'zone-a'],
        ['10.244.1.2', 'zone-b'],
      ]),
    );
    cache.setEndpointSlice(hinted('web-2', [['10.244.2.1', 'zone-b']]));
    const cluster = () =>
      addresses([...cache.update().state.IPv4!.servicePorts.values()][0]!.clusterEndpoints);
    assert.deepEqual(cluster(), ['10.244.1.1:8080']);
    // Merged into the kept list (web-1 unchanged).
    cache.setEndpointSlice(hinted('web-2', [['10.244.2.1', 'zone-a']]));
    assert.deepEqual(cluster(), ['10.244.1.1:8080', '10.244.2.1:8080']);
  });
});
