// Helpers for nftables kernel tests: load a script into a lab namespace, read the table back in a
// canonical form (handles dropped, objects sorted, rule order within a chain kept, the canary's
// nonce ignored).
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

/** `nft -j list ruleset` in a canonical form that ignores creation order and handles. */
export async function canonicalRuleset(lab: Lab, ns: string): Promise<Json> {
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
    if (Array.isArray(clean.elem)) clean.elem = [...clean.elem].sort(byJSON);
    others.push({ [kind]: clean });
  }
  return { objects: others.sort(byJSON), rules: [...rules].sort(([a], [b]) => (a < b ? -1 : 1)) };
}
