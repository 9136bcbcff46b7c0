// A parsed document → the objects it stands for. `kubectl get -o yaml|json` of several kinds prints
// a `kind: List` whose items carry their own kind and apiVersion; a single kind's list from the API
// server (`kubectl get --raw /api/v1/services`, `kubectl cluster-info dump`) is typed (ServiceList,
// NodeList, ...) and its items carry neither: the list's kind without "List" and its apiVersion are
// theirs, as the informers take them from the resource they list.

/**
 * A v1 List (or ServiceList, ...) and a JSON array stand for their items; anything else for itself.
 * Only one level of array: deeper (or cyclic, via YAML aliases) arrays are invalid objects, not a
 * stack overflow.
 */
export function listItems(document: unknown): unknown[] {
  return Array.isArray(document) ? document.flatMap(listOrObject) : listOrObject(document);
}

function listOrObject(document: unknown): unknown[] {
  if (typeof document !== 'object' || document === null) return [document];
  const { kind, apiVersion, items } = document as { kind?: unknown; apiVersion?: unknown; items?: unknown };
  if (typeof kind !== 'string' || !kind.endsWith('List') || !Array.isArray(items)) return [document];
  const itemKind = kind.slice(0, -'List'.length);
  if (itemKind === '') return items;
  return items.map((item) => typedItem(item, itemKind, apiVersion));
}

/** The item with the list's kind and apiVersion where it has none of its own (a copy: input is not changed). */
function typedItem(item: unknown, kind: string, apiVersion: unknown): unknown {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
  const own = item as { kind?: unknown; apiVersion?: unknown };
  // An item of another kind keeps what it says, and so does one that says both.
  if (own.kind !== undefined && (own.kind !== kind || own.apiVersion !== undefined)) return item;
  const versioned = own.apiVersion === undefined && typeof apiVersion === 'string';
  return versioned ? { ...item, kind, apiVersion } : { ...item, kind };
}
