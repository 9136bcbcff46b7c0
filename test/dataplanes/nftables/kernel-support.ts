// Helpers for nftables kernel tests: load a script into a lab namespace, read the table back in a
// canonical form (handles dropped, objects sorted, rule order within a chain kept, the canary's
// nonce ignored; optionally the endpoints' indexes too).
import { CANARY_SET } from '../../../dataplanes/shared/nft/ruleset.ts';
import type { Lab } from '../../../harness/netns.ts';

export async function nftLoad(lab: Lab, ns: string, script: string): Promise<void> {
  if (script === '') return;
  await lab.exec(ns, 'nft', ['-f', '-'], { input: script });
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Drops every `handle` from freshly parsed JSON, in place (a copy of each listing cost twice as much). */
function dropHandles(value: Json): void {
  if (Array.isArray(value)) for (const item of value) dropHandles(item);
  else if (value !== null && typeof value === 'object') {
    delete value.handle;
    for (const key in value) dropHandles(value[key]!);
  }
}

/** Sorted by their JSON text, each item's text made once (not at each of n log n comparisons). */
function sortedByJSON(items: readonly Json[]): Json[] {
  return items
    .map((item) => [JSON.stringify(item), item] as const)
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
    .map(([, item]) => item);
}

/** Endpoint maps keyed `… . index` (dataplanes/nftables/endpoint-slots.ts). */
const INDEXED_MAP = /backends(-(tcp|udp|sctp))?(-ips)?$/;

/**
 * A map's `[key . index, value]` elements with the index left out (`*`) where a key's indexes are
 * exactly 0..N-1: each key's endpoints as a multiset. Else unchanged (the two forms then differ).
 */
function withoutIndexes(elements: Json[]): Json[] {
  const split = elements.map((element) => {
    const key = Array.isArray(element) ? (element[0] as { concat?: Json[] }) : undefined;
    const concat = key?.concat;
    if (!Array.isArray(concat)) return undefined;
    return { prefix: JSON.stringify(concat.slice(0, -1)), index: Number(concat.at(-1)) };
  });
  const indexes = new Map<string, number[]>();
  for (const part of split)
    if (part) indexes.set(part.prefix, [...(indexes.get(part.prefix) ?? []), part.index]);
  const dense = new Set(
    [...indexes].filter(([, list]) => list.sort((a, b) => a - b).every((i, n) => i === n)).map(([p]) => p),
  );
  return elements.map((element, i) => {
    const part = split[i];
    if (!part || !dense.has(part.prefix)) return element;
    const [key, value] = element as [{ concat: Json[] }, Json];
    return [{ concat: [...key.concat.slice(0, -1), '*'] }, value];
  });
}

/**
 * `nft -j list ruleset` in a canonical form that ignores creation order and handles, and with
 * `upToNumbering` which index each endpoint holds: incremental syncs keep an endpoint's slot, a
 * full sync numbers in address order (endpoint-slots.ts).
 */
export async function canonicalRuleset(
  lab: Lab,
  ns: string,
  options: { upToNumbering?: boolean } = {},
): Promise<Json> {
  const { stdout } = await lab.exec(ns, 'nft', ['-j', 'list', 'ruleset']);
  const objects = (JSON.parse(stdout) as { nftables: Record<string, Json>[] }).nftables;
  const others: Json[] = [];
  const rules = new Map<string, Json[]>();
  for (const object of objects) {
    const [kind, body] = Object.entries(object)[0]!;
    if (kind === 'metainfo') continue;
    const clean = body as { [key: string]: Json };
    dropHandles(clean);
    if (kind === 'rule') {
      const chain = `${clean.family} ${clean.chain}`;
      const list = rules.get(chain);
      if (list === undefined) rules.set(chain, [clean]);
      else list.push(clean);
      continue;
    }
    // The canary's nonce counts the full syncs of a live dataplane: a restarted one starts over.
    if (clean.name === CANARY_SET) delete clean.elem;
    if (Array.isArray(clean.elem) && options.upToNumbering && INDEXED_MAP.test(String(clean.name)))
      clean.elem = withoutIndexes(clean.elem);
    if (Array.isArray(clean.elem)) clean.elem = sortedByJSON(clean.elem);
    others.push({ [kind]: clean });
  }
  return { objects: sortedByJSON(others), rules: [...rules].sort(([a], [b]) => (a < b ? -1 : 1)) };
}
