// The candidates of a service port whose endpoints come from several slices, kept by the
// incremental model (model-cache.ts) between updates: a change of one slice is merged into the
// kept list (that slice's old endpoints found and dropped, its new ones put in place, by binary
// search) instead of the list being rebuilt from every slice. Rebuilding sorted all of a port's
// candidates: one change of a Service with 100,000 endpoints in 1,000 slices took 40 ms (issue 33).
//
// A list is kept only while it holds one candidate per ip:port. Copies of one from two slices (an
// endpoint moving between slices) are ordered by slice and the preferred one chosen
// (endpoints.ts): a port with copies, or that a merge would give copies, is rebuilt instead, at
// each change while it has them. A port of one slice keeps nothing: that slice's own array is its
// list already.
//
// A long list is a ChunkedList (contract/chunked-list.ts): a merge copies the chunks it touches,
// so the next state's endpoint list shares the rest with the last one, and a dataplane comparing
// the two steps over the shared chunks. One change of a Service with 100,000 endpoints then costs
// its few chunks, where the copies of two 100,000-item arrays took 4-8 ms on this project's VMs.
import { compareText } from '../../contract/base/compare-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import {
  CHUNKS,
  type ChunkShape,
  type Insert,
  listOf,
  type ReadonlyList,
  splicedList,
} from '../../contract/chunked-list.ts';
import type { EndpointList } from '../../contract/proxy-state.ts';
import {
  type CandidateCounts,
  type CandidateEndpoint,
  compareCandidates,
  oneOfEach,
  type PortCandidates,
  portCandidates,
  type SlicePortSource,
  sortedCandidates,
  sourceCandidates,
} from './endpoints.ts';

/** A port's candidates from its sources (in slice-name order), for one recompute of its service. */
export type CandidatesOf = (matchKey: string, sources: readonly SlicePortSource[]) => PortCandidates;

interface Merge {
  readonly sources: readonly SlicePortSource[];
  /** One per ip:port, sorted by ip then port. */
  readonly candidates: ReadonlyList<CandidateEndpoint>;
  /** Their endpoints in their order: the port's `whole` list, chunked as `candidates` is. */
  readonly endpoints: EndpointList;
  readonly counts: CandidateCounts;
}

export class CandidateMerges {
  /** "family service" → port match key → its kept list. */
  readonly #kept = new Map<string, Map<string, Merge>>();
  readonly #shape: ChunkShape;

  /** `shape`: which lists are chunked, and how (tests make small ones chunked). */
  constructor(shape = CHUNKS) {
    this.#shape = shape;
  }

  /**
   * The ports of one service and family, built by `build` with candidates merged into what the
   * previous build of them kept; what it kept for ports this one no longer has is dropped.
   */
  ofService<T>(service: string, family: IPFamily, build: (candidates: CandidatesOf) => T): T {
    const key = `${family} ${service}`;
    const before = this.#kept.get(key);
    const now = new Map<string, Merge>();
    const result = build((matchKey, sources) => {
      if (sources.length < 2) return portCandidates(sources);
      const kept = before?.get(matchKey);
      let merge = kept && merged(kept, sources, this.#shape);
      if (merge === undefined) {
        const all = sortedCandidates(sources);
        // Sorted once: a list with copies is made into the port's candidates as it is.
        if (hasCopies(all)) return { candidates: oneOfEach(all), whole: undefined };
        merge = mergeOf(sources, all, this.#shape);
      }
      now.set(matchKey, merge);
      return { candidates: merge.candidates, whole: merge.endpoints, counts: merge.counts };
    });
    if (now.size > 0) this.#kept.set(key, now);
    else this.#kept.delete(key);
    return result;
  }

  /** A service that is gone. */
  forget(service: string): void {
    for (const family of ['IPv4', 'IPv6'] as const) this.#kept.delete(`${family} ${service}`);
  }
}

/** Whether `sorted` (sortedCandidates) holds two candidates of one ip:port. */
function hasCopies(sorted: readonly CandidateEndpoint[]): boolean {
  for (let i = 1; i < sorted.length; i++)
    if (compareCandidates(sorted[i - 1]!, sorted[i]!) === 0) return true;
  return false;
}

/** The kept list of `sources` whose candidates, sorted, are `candidates` (one per ip:port). */
function mergeOf(
  sources: readonly SlicePortSource[],
  candidates: readonly CandidateEndpoint[],
  shape: ChunkShape,
): Merge {
  return {
    sources,
    candidates: listOf(candidates, shape),
    endpoints: listOf(
      candidates.map((c) => c.endpoint),
      shape,
    ),
    counts: counted(candidates, { ready: 0, hinted: 0 }, 1),
  };
}

/** `counts` with those of `candidates` added (`sign` 1) or taken out (-1). */
function counted(
  candidates: Iterable<CandidateEndpoint>,
  counts: CandidateCounts,
  sign: 1 | -1,
): CandidateCounts {
  let { ready, hinted } = counts;
  for (const c of candidates) {
    if (c.endpoint.ready) ready += sign;
    if (c.zoneHints.length > 0 || c.nodeHints.length > 0) hinted += sign;
  }
  return { ready, hinted };
}

/**
 * `kept` with the sources it has and `sources` lacks taken out and those `sources` adds put in;
 * undefined when that would give an ip:port two candidates.
 */
function merged(kept: Merge, sources: readonly SlicePortSource[], shape: ChunkShape): Merge | undefined {
  const { gone: goneSources, came } = sourceChanges(kept.sources, sources);
  if (goneSources.length === 0 && came.length === 0) return kept;
  const list = kept.candidates;
  // Where the endpoints of the sources gone are: the list holds each of them (it has no copies).
  const dropped: number[] = [];
  for (const source of goneSources) {
    for (const endpoint of source.port.endpoints) {
      const at = lowerBound(list, endpoint.ip, endpoint.port);
      if (list.at(at)?.endpoint !== endpoint)
        throw new Error(
          `candidate merges: ${endpoint.ip}:${endpoint.port} is not where the kept list has it`,
        );
      dropped.push(at);
    }
  }
  dropped.sort((a, b) => a - b);
  const gone = dropped.map((at) => list.at(at)!);
  const arriving: CandidateEndpoint[] = [];
  for (const source of came) sourceCandidates(source, arriving);
  arriving.sort(compareCandidates);
  // Where each arrival goes in the list; one whose ip:port the list keeps, or another arrival has,
  // would be a copy.
  const places = arriving.map((candidate, k) => {
    const at = lowerBound(list, candidate.ip, candidate.endpoint.port);
    const there = list.at(at);
    const copy =
      (there !== undefined && compareCandidates(there, candidate) === 0 && !isIn(dropped, at)) ||
      (k > 0 && compareCandidates(arriving[k - 1]!, candidate) === 0);
    return copy ? -1 : at;
  });
  if (places.includes(-1)) return undefined;
  // Both lists edited alike, so a chunked pair stays chunked alike (only touched chunks copied).
  const inserted: Insert<CandidateEndpoint>[] = arriving.map((item, k) => ({ before: places[k]!, item }));
  return {
    sources,
    candidates: splicedList(list, dropped, inserted, shape),
    endpoints: splicedList(
      kept.endpoints,
      dropped,
      inserted.map(({ before, item }) => ({ before, item: item.endpoint })),
      shape,
    ),
    counts: counted(arriving, counted(gone, kept.counts, -1), 1),
  };
}

/**
 * The sources of `before` that `now` lacks and those it adds (a source is its port's object: a
 * changed slice has a new one). Both lists are in slice-name order, so past their common start and
 * end (a pointer comparison a slice) only the few in between are looked at, not a set of each
 * list's thousand.
 */
function sourceChanges(
  before: readonly SlicePortSource[],
  now: readonly SlicePortSource[],
): { gone: readonly SlicePortSource[]; came: readonly SlicePortSource[] } {
  let start = 0;
  while (start < before.length && start < now.length && before[start]!.port === now[start]!.port) start++;
  let end = 0;
  while (
    end < before.length - start &&
    end < now.length - start &&
    before[before.length - 1 - end]!.port === now[now.length - 1 - end]!.port
  )
    end++;
  const middleBefore = before.slice(start, before.length - end);
  const middleNow = now.slice(start, now.length - end);
  const had = new Set(middleBefore.map((s) => s.port));
  const has = new Set(middleNow.map((s) => s.port));
  return {
    gone: middleBefore.filter((s) => !has.has(s.port)),
    came: middleNow.filter((s) => !had.has(s.port)),
  };
}

/** The first index of `list` (sorted) whose candidate is not before ip:port. */
function lowerBound(list: ReadonlyList<CandidateEndpoint>, ip: string, port: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = list.at(mid)!;
    if ((compareText(c.ip, ip) || c.endpoint.port - port) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether `sorted` (ascending) holds `n`. */
function isIn(sorted: readonly number[], n: number): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < n) lo = mid + 1;
    else hi = mid;
  }
  return sorted[lo] === n;
}
