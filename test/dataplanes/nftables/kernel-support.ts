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

function withoutHandles(value: Json): Json {
  if (Array.isArray(value)) return value.map(withoutHandles);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => k !== 'handle')
        .map(([k, v]) => [k, withoutHandles(v)]),
    );
  }
  return value;
}

function byJSON(a: Json, b: Json): number {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return x < y ? -1 : x > y ? 1 : 0;
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
    const clean = withoutHandles(body) as { [key: string]: Json };
    if (kind === 'rule') {
      const chain = `${clean.family} ${clean.chain}`;
      rules.set(chain, [...(rules.get(chain) ?? []), clean]);
      continue;
    }
    // The canary's nonce counts the full syncs of a live dataplane: a restarted one starts over.
    if (clean.name === CANARY_SET) delete clean.elem;
    if (Array.isArray(clean.elem) && options.upToNumbering && INDEXED_MAP.test(String(clean.name)))
      clean.elem = withoutIndexes(clean.elem);
    if (Array.isArray(clean.elem)) clean.elem = [...clean.elem].sort(byJSON);
    others.push({ [kind]: clean });
  }
  return { objects: others.sort(byJSON), rules: [...rules].sort(([a], [b]) => (a < b ? -1 : 1)) };
}
