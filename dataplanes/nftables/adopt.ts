// Start-up adoption: rebuild the committed record from our own table as an earlier run left it
// (`nft -j list table`), so a restart reconciles with element updates instead of replacing the
// table under traffic (which would also forget session-affinity state).
//
// Elements are read back exactly. Rules are not parsed back from JSON: adopted chains carry
// UNKNOWN_RULES, and the diff rewrites every chain that still exists (flush + add, a few dozen
// rules) and deletes the rest. Set definitions are taken on trust by name; if one differs, nft
// refuses the transaction and the dataplane falls back to a full sync.
import { CANARY_SET } from './base-objects.ts';
import { type FamilyRuleset, UNKNOWN_RULES } from './ruleset.ts';
import type { ChainSpec, ElementSpec, NftFamily, SetSpec } from './transaction.ts';

type Json = null | boolean | number | string | Json[] | { readonly [key: string]: Json };

/** nft JSON expression -> the text kproxy writes for it. */
function exprText(expr: Json): string {
  if (typeof expr === 'string' || typeof expr === 'number') return String(expr);
  if (expr !== null && typeof expr === 'object' && !Array.isArray(expr)) {
    if ('concat' in expr && Array.isArray(expr.concat)) return expr.concat.map(exprText).join(' . ');
    if ('prefix' in expr) {
      const p = expr.prefix as { addr: Json; len: Json };
      return `${exprText(p.addr)}/${exprText(p.len)}`;
    }
    if ('range' in expr && Array.isArray(expr.range)) return expr.range.map(exprText).join('-');
    for (const verdict of ['goto', 'jump'] as const) {
      if (verdict in expr) return `${verdict} ${String((expr[verdict] as { target: Json }).target)}`;
    }
    for (const verdict of ['drop', 'accept', 'return', 'continue']) if (verdict in expr) return verdict;
  }
  throw new Error(`cannot read back nft expression ${JSON.stringify(expr)}`);
}

function elementOf(raw: Json): ElementSpec {
  const [keyExpr, valueExpr] = Array.isArray(raw) ? raw : [raw, undefined];
  let key = keyExpr as Json;
  let comment: string | undefined;
  if (key !== null && typeof key === 'object' && !Array.isArray(key) && 'elem' in key) {
    const elem = key.elem as { val: Json; comment?: string };
    key = elem.val;
    comment = elem.comment;
  }
  return {
    key: exprText(key),
    ...(valueExpr !== undefined && { value: exprText(valueExpr) }),
    ...(comment !== undefined && { comment }),
  };
}

/** The record of an existing table, from `nft -j list table`; undefined when there is none. */
export function adoptTable(family: NftFamily, listing: unknown): FamilyRuleset | undefined {
  if (listing === undefined) return undefined;
  const objects = (listing as { nftables?: Record<string, Record<string, Json>>[] }).nftables ?? [];
  const sets = new Map<string, SetSpec>();
  const chains = new Map<string, ChainSpec>();
  const elements = new Map<string, Map<string, ElementSpec>>();
  for (const object of objects) {
    const [kind, body] = Object.entries(object)[0] ?? [];
    if (body === undefined) continue;
    const name = String(body.name);
    if (kind === 'chain') chains.set(name, { name, rules: UNKNOWN_RULES });
    if (kind === 'set' || kind === 'map') {
      sets.set(name, { name, kind, type: 'adopted' });
      // Entries of dynamic sets (affinity) are added by packets, and the canary's by the live
      // dataplane outside any plan: neither is part of the record.
      const dynamic = Array.isArray(body.flags) && body.flags.includes('dynamic');
      const list =
        Array.isArray(body.elem) && !dynamic && name !== CANARY_SET ? body.elem.map(elementOf) : [];
      elements.set(name, new Map(list.map((e) => [e.key, e])));
    }
  }
  return { family, sets, chains, elements, adopted: true };
}

/** The nonce in a canary set listing (`nft -j list set` or `list table`), if there is one. */
export function canaryNonce(listing: unknown): number | undefined {
  const objects =
    (listing as { nftables?: Record<string, Record<string, Json>>[] } | undefined)?.nftables ?? [];
  for (const object of objects) {
    const set = object.set;
    if (set?.name === CANARY_SET && Array.isArray(set.elem) && set.elem.length === 1)
      return Number(set.elem[0]);
  }
  return undefined;
}
