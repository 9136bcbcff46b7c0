// The PATCH bodies kubectl sends: JSON merge patch (RFC 7386, application/merge-patch+json) and
// strategic merge patch (application/strategic-merge-patch+json, what `kubectl apply` and
// `kubectl patch` send for built-in types). A strategic merge patch is a merge patch in which some
// lists merge by a key instead of being replaced, plus directives ($patch, $retainKeys,
// $setElementOrder/<list>, $deleteFromPrimitiveList/<list>). The lists that merge are those marked
// patchStrategy=merge in the API types of the three served kinds; every other list is replaced.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Per kind, the dotted path of each list that merges: by this key, or by value ('' for primitives). */
const MERGE_LISTS: Record<string, Record<string, string>> = {
  Service: { 'spec.ports': 'port', 'status.conditions': 'type' },
  EndpointSlice: {},
  Node: { 'spec.podCIDRs': '', 'status.addresses': 'type', 'status.conditions': 'type' },
};
const METADATA_LISTS: Record<string, string> = {
  'metadata.ownerReferences': 'uid',
  'metadata.finalizers': '',
};

export class PatchError extends Error {}

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386: objects merge key by key, null deletes, anything else replaces. */
export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/** Applies a strategic merge patch to an object of `kind`. Throws PatchError on a malformed patch. */
export function strategicMergePatch(kind: string, target: JsonObject, patch: Json): JsonObject {
  if (!isObject(patch)) throw new PatchError('a strategic merge patch must be a JSON object');
  const lists = { ...METADATA_LISTS, ...MERGE_LISTS[kind] };
  const merged = mergeMap(target, patch, '', lists);
  if (merged === undefined) throw new PatchError('$patch: delete of the whole object is not supported');
  return merged;
}

/** The merged map, or undefined when the patch deletes it ($patch: delete). */
function mergeMap(
  target: JsonObject | undefined,
  patch: JsonObject,
  path: string,
  lists: Record<string, string>,
): JsonObject | undefined {
  const { $patch: directive, $retainKeys: retain, ...rest } = patch;
  if (directive === 'delete') return undefined;
  if (directive === 'replace') return stripDirectives(rest) as JsonObject;
  if (directive !== undefined && directive !== 'merge') throw new PatchError(`unknown $patch: ${directive}`);
  const out: JsonObject = { ...target };
  const orders = new Map<string, Json[]>();
  for (const [key, value] of Object.entries(rest)) {
    if (key.startsWith('$setElementOrder/')) {
      if (!Array.isArray(value)) throw new PatchError(`${key} must be a list`);
      orders.set(key.slice('$setElementOrder/'.length), value);
    } else if (key.startsWith('$deleteFromPrimitiveList/')) {
      const field = key.slice('$deleteFromPrimitiveList/'.length);
      if (!Array.isArray(value)) throw new PatchError(`${key} must be a list`);
      const current = out[field];
      if (Array.isArray(current)) out[field] = current.filter((v) => !value.includes(v));
    }
  }
  for (const [key, value] of Object.entries(rest)) {
    if (key.startsWith('$')) continue;
    const childPath = path === '' ? key : `${path}.${key}`;
    if (value === null) delete out[key];
    else if (isObject(value)) {
      const merged = mergeMap(isObject(out[key]) ? out[key] : undefined, value, childPath, lists);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    } else if (Array.isArray(value) && lists[childPath] !== undefined) {
      out[key] = mergeList(out[key], value, lists[childPath], childPath, lists);
    } else out[key] = stripDirectives(value);
  }
  for (const [key, order] of orders) {
    const list = out[key];
    if (Array.isArray(list))
      out[key] = ordered(list, order, lists[path === '' ? key : `${path}.${key}`] ?? '');
  }
  if (retain !== undefined) {
    if (!Array.isArray(retain)) throw new PatchError('$retainKeys must be a list');
    for (const key of Object.keys(out)) if (!retain.includes(key)) delete out[key];
  }
  return out;
}

function mergeList(
  target: Json | undefined,
  patch: Json[],
  mergeKey: string,
  path: string,
  lists: Record<string, string>,
): Json[] {
  const current = Array.isArray(target) ? target : [];
  if (patch.some((item) => isObject(item) && item.$patch === 'replace')) {
    return patch.filter((item) => !(isObject(item) && item.$patch === 'replace')).map(stripDirectives);
  }
  if (mergeKey === '') return [...current, ...patch.filter((v) => !current.includes(v))];
  const out = [...current];
  for (const item of patch) {
    if (!isObject(item) || item[mergeKey] === undefined)
      throw new PatchError(`${path}: every element needs its merge key "${mergeKey}"`);
    const at = out.findIndex((o) => isObject(o) && o[mergeKey] === item[mergeKey]);
    if (item.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
      continue;
    }
    const merged = mergeMap(at >= 0 ? (out[at] as JsonObject) : undefined, item, path, lists) ?? {};
    if (at >= 0) out[at] = merged;
    else out.push(merged);
  }
  return out;
}

/** The list in $setElementOrder's order; elements it does not name keep their place after those it does. */
function ordered(list: Json[], order: Json[], mergeKey: string): Json[] {
  const keyOf = (v: Json) => (mergeKey !== '' && isObject(v) ? v[mergeKey] : v);
  const wanted = order.map(keyOf);
  const rank = (v: Json) => {
    const i = wanted.indexOf(keyOf(v));
    return i < 0 ? wanted.length : i;
  };
  return list
    .map((v, i) => ({ v, i }))
    .sort((a, b) => rank(a.v) - rank(b.v) || a.i - b.i)
    .map(({ v }) => v);
}

function stripDirectives(value: Json): Json {
  if (Array.isArray(value)) return value.map(stripDirectives);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) if (!k.startsWith('$')) out[k] = stripDirectives(v);
  return out;
}
